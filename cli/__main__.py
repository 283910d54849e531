from everlast.cli.main import main

main()
