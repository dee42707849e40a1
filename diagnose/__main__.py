from diagnose.cli import run

raise SystemExit(run())
