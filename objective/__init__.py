"""AmbiHTMLBench's objective protocol computed from renders (docs/protocol.md "The objective protocol")."""
