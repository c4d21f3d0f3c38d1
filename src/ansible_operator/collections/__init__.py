"""The ``operator_sdk.util`` Ansible collection, shipped inside this package.

Roles written for Operator SDK call ``operator_sdk.util.k8s_status``,
``requeue_after``, ``k8s_event`` and ``osdk_metric``; every run gets this
directory on its ``ANSIBLE_COLLECTIONS_PATH`` so those roles run unchanged.
"""

from __future__ import annotations

from pathlib import Path

# The directory that contains ``ansible_collections/``: put it on ANSIBLE_COLLECTIONS_PATH.
COLLECTIONS_PATH = Path(__file__).parent

__all__ = ["COLLECTIONS_PATH"]
