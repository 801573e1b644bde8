from oxport.cli import main

raise SystemExit(main())
