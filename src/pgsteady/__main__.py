from pgsteady.cli import main

raise SystemExit(main())
