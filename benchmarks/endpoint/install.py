"""Making sure nginx and its echo module are on the machine (Debian packages), installing them if we can."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

NGINX_BINARY = Path("/usr/sbin/nginx")
"""The nginx executable of Debian's ``nginx-light`` package."""

ECHO_MODULE = Path("/usr/lib/nginx/modules/ngx_http_echo_module.so")
"""The echo module of Debian's ``libnginx-mod-http-echo``; the ``s3like`` profile needs it."""

DEBIAN_PACKAGES = ("nginx-light", "libnginx-mod-http-echo")

# Another apt run (a set-up script installing in the background) may hold the dpkg lock for a while.
_APT_LOCK_TIMEOUT_S = 600

# What scripts/sanitize.sh sets for the tests it runs: apt's helpers must not inherit it. With ASan preloaded,
# apt-get update's gpgv hung for good in a futex wait (seen in a fresh-clone CI run, where test_tls.py's
# fixture was the first to need nginx).
_SANITIZER_VARIABLES = ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")


def missing_nginx_files() -> list[Path]:
    """The files of nginx and the echo module that are not installed (empty when all are)."""
    return [path for path in (NGINX_BINARY, ECHO_MODULE) if not path.exists()]


def ensure_nginx_installed() -> None:
    """Install ``nginx-light`` and ``libnginx-mod-http-echo`` with apt-get unless already present.

    Needs root and apt-get; without them, raises RuntimeError saying what to install. Raises
    ``subprocess.CalledProcessError`` if apt-get fails.
    """
    missing = missing_nginx_files()
    if not missing:
        return
    install_command = ["apt-get", "install", "-y", "--no-install-recommends", *DEBIAN_PACKAGES]
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(
            f"nginx for the local S3 endpoint is missing ({', '.join(map(str, missing))}); "
            f"install it as root with: {' '.join(install_command)}"
        )
    environment = {
        **{name: value for name, value in os.environ.items() if name not in _SANITIZER_VARIABLES},
        "DEBIAN_FRONTEND": "noninteractive",
    }
    lock_option = ["-o", f"DPkg::Lock::Timeout={_APT_LOCK_TIMEOUT_S}"]
    subprocess.run(["apt-get", *lock_option, "update"], check=True, env=environment)
    subprocess.run([*install_command[:1], *lock_option, *install_command[1:]], check=True, env=environment)
    still_missing = missing_nginx_files()
    if still_missing:
        raise RuntimeError(f"installed {DEBIAN_PACKAGES} but these are still missing: {still_missing}")


if __name__ == "__main__":  # scripts/test.sh, before any test process needs nginx
    ensure_nginx_installed()
