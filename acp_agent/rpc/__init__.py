"""JSON-RPC 2.0 over newline-delimited JSON."""
