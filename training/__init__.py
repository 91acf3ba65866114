"""What makes artifacts: `python -m training.<model> --out artifacts/<model>`."""
