"""Process start-up: what importing the stack costs a new process."""
