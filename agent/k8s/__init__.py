"""Kubernetes: pod attribution through the kubelet pod-resources API."""
