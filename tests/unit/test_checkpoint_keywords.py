"""torchdata_s3.save / load tell S3 keywords from torch's by name: the two sets must never share a name."""

from __future__ import annotations

import inspect

import torch

from torchdata_s3.checkpoint.torch_save import S3_OPTION_NAMES, WRITER_KEYWORDS, split_keywords


def torch_parameter_names(function: object) -> set[str]:
    return {
        parameter.name
        for parameter in inspect.signature(function).parameters.values()
        if parameter.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
    }


def test_no_s3_keyword_is_a_torch_save_or_load_parameter() -> None:
    s3_names = S3_OPTION_NAMES | WRITER_KEYWORDS
    assert not s3_names & torch_parameter_names(torch.save)
    assert not s3_names & torch_parameter_names(torch.load)
    # pickle's Unpickler keywords reach torch.load through **pickle_load_args.
    assert not s3_names & {"encoding", "errors", "fix_imports", "buffers"}


def test_keywords_are_split_by_name() -> None:
    s3, passed_on = split_keywords(
        {
            "endpoint_url": "http://127.0.0.1:1",
            "overwrite": False,
            "pickle_protocol": 2,
            "encoding": "latin1",
        },
        S3_OPTION_NAMES | WRITER_KEYWORDS,
    )
    assert s3 == {"endpoint_url": "http://127.0.0.1:1", "overwrite": False}
    assert passed_on == {"pickle_protocol": 2, "encoding": "latin1"}
