"""`npuwatch check`: tiered node checks with one verdict per check and one per level, the exit codes
schedulers read (Nagios, node-problem-detector), fleet baselines, and the agent's scheduled levels."""
