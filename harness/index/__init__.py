"""The package index as of a moment: which releases it serves and when they were uploaded, the
nights between two releases, cut-offs where pip resolves, and the user's pip settings."""
