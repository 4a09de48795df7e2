"""The approvers' inbox: web pages at ``/approvals/`` inside the admin's frame (views, selectors,
forms, and the form generated from a tool's JSON Schema)."""
