from pgsteady._main import main

raise SystemExit(main())
