"""`python -m podium` runs the podium command."""

from podium.cli.main import main

main()
