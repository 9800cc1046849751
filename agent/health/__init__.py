"""Is this part of the node healthy: reading the node's tools and logs, and judging each fault."""
