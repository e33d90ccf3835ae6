"""Benchmarks: run each as a module from the repository root (bench/harness.py)."""
