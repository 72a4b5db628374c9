"""The benchmark harness's embedded S3 endpoint: nginx serving objects from a directory tree, a listing
sidecar answering ListObjectsV2, optional latency and bandwidth shaping, and a check that the shaping holds.
With ``writes=True`` it also takes uploads (PutObject, multipart uploads, deletes), shaped the same way.

Entry points: :class:`benchmarks.endpoint.nginx.LocalEndpoint`,
:func:`benchmarks.endpoint.install.ensure_nginx_installed`, :func:`benchmarks.endpoint.verify.check_profile`,
``python -m benchmarks.endpoint.write_capacity``.
"""
