"""What follows a finding: its A/B confirmation, bisection requests, GitHub issues and culprit comments, and the
workflow that ties them (the steps in order: service.alerts.workflow; docs/architecture.md, "What happens to a
finding"). The words (confirmation states, bisection verdicts) are perfdash.verdicts'; service.github posts what it
is handed."""
