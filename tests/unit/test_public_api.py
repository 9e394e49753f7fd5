from __future__ import annotations

import podium
import podium.sched


def test_all_is_sorted_and_exported() -> None:
    for module in (podium, podium.sched):
        assert list(module.__all__) == sorted(module.__all__)
        for name in module.__all__:
            assert hasattr(module, name)


def test_client_path_does_not_load_server_libraries() -> None:
    import subprocess
    import sys

    code = (
        "import sys; import podium.cli.main, podium.cli.submit, podium.cli.job_cmds;"
        "import podium.backends;"
        "print(','.join(m for m in ('pydantic','fastapi','uvicorn','rich','yaml','httpx','psutil')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
