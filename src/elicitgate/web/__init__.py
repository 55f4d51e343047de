"""The gateway's own web surface: hosted elicitation pages, the inbox and the admin API."""
