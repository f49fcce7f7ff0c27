"""Process entry point of one fuzz target.

Fuzz with atheris/libFuzzer (extra arguments go to libFuzzer: corpus directories, ``-runs``,
``-max_total_time``, ``-timeout``, ``-rss_limit_mb``, ``-artifact_prefix`` ...)::

    python tests/fuzz/run.py TARGET [LIBFUZZER_ARGS...]

Reproduce saved inputs without atheris, showing the full traceback::

    python tests/fuzz/run.py --plain TARGET FILE...

The project's modules are imported inside ``atheris.instrument_imports`` so libFuzzer gets
coverage feedback from the decoders themselves, and from rdflib (atheris instruments whole
top-level packages), whose term constructors the rdflib adapter calls. Protobuf parsing is
native code (upb) and contributes no Python coverage; its comparisons are not guided.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _plain(target: str, files: list[str]) -> int:
    from tests.fuzz.targets import TARGETS

    fuzz = TARGETS[target]
    for name in files:
        fuzz(Path(name).read_bytes())
        print(f"{name}: ok")
    return 0


def _timer_stopped_on_escape(fuzz: Callable[[bytes], None]) -> Callable[[bytes], None]:
    """``fuzz``, stopping the timeout timer when an exception escapes it.

    atheris reports an escaping exception by ending the interpreter. The teardown sets
    SIGALRM back to "terminate" while atheris's timeout timer keeps firing, and libFuzzer
    saves the input only once the teardown is over: on a loaded machine the timer could
    kill the run in between, with the finding lost. The input is a finding already, so
    no timeout is wanted for it.
    """

    def one_input(data: bytes) -> None:
        try:
            fuzz(data)
        except BaseException:
            signal.setitimer(signal.ITIMER_REAL, 0)
            raise

    return one_input


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[1] == "--plain":
        if len(argv) < 4:
            print(__doc__, file=sys.stderr)
            return 2
        return _plain(argv[2], argv[3:])
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    import logging

    import atheris

    # rdflib logs a warning per odd IRI; at thousands of inputs a second that is only noise.
    logging.getLogger("rdflib").setLevel(logging.ERROR)

    with atheris.instrument_imports(include=["patchsync", "rdflib.term"]):
        from tests.fuzz.targets import TARGETS

    fuzz = TARGETS[argv[1]]
    # atheris reads argv[0] as the program name and the rest as libFuzzer flags.
    atheris.Setup([argv[0], *argv[2:]], _timer_stopped_on_escape(fuzz))
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
