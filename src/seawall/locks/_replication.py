"""`replicas=`: how many replicas must acknowledge an acquisition before it counts.

Pure decisions only; the round trip (the acquire script and WAIT on one connection) is
`seawall.locks._async.replication.run_script_replicated` and its generated sync twin.

Any primitive adopts it in three steps: build a policy at construction with
`replica_policy(replicas, replica_timeout, what)`; send its acquire script through
`run_script_replicated(client, script, keys, args, policy)` when the policy is not None;
when the script took something but `policy.enough(acked)` is False, undo the acquisition
with the primitive's own release script and raise `policy.error(what, name, acked)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from seawall.errors import LockNotReplicatedError
from seawall.shared._validate import check_replicas, check_seconds

# How long an acquisition waits for its replicas unless told otherwise (seconds).
DEFAULT_REPLICA_TIMEOUT = 1.0


@dataclass(frozen=True, slots=True)
class ReplicaPolicy:
    replicas: int  # acknowledgements needed, >= 1
    timeout: float  # seconds WAIT may block

    @property
    def wait_ms(self) -> int:
        # WAIT with 0 ms blocks forever, so never round down to it.
        return max(1, round(self.timeout * 1000))

    def enough(self, acked: int) -> bool:
        return acked >= self.replicas

    def error(self, what: str, name: str, acked: int) -> LockNotReplicatedError:
        return LockNotReplicatedError(
            f"{what} {name!r} was acquired, but only {acked} of the {self.replicas} "
            f"replica(s) required by replicas={self.replicas} acknowledged it within "
            f"{self.timeout:g} s, so it was released again: a failover could have lost it. "
            "Check the replicas (ROLE / INFO replication on the master), raise "
            "replica_timeout=, or lower replicas=",
            lock_name=name,
            required=self.replicas,
            acked=acked,
        )


def replica_policy(replicas: object, replica_timeout: object, what: str) -> ReplicaPolicy | None:
    """The policy for `replicas=`/`replica_timeout=`, or None when replicas is 0."""
    needed = check_replicas(replicas, f"replicas of {what}")
    timeout = check_seconds(replica_timeout, f"replica_timeout of {what}")
    return ReplicaPolicy(needed, timeout) if needed else None
