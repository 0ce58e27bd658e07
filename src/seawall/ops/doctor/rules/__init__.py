"""The doctor's rules, a few per module by theme, each a function with a code (SD0xx), the
guideline it comes from, and its rationale and fix in the docstring."""

from __future__ import annotations

from seawall.ops.doctor._model import Rule
from seawall.ops.doctor.rules import commands, keys, memory, server

RULES: tuple[Rule, ...] = (
    memory.maxmemory,
    memory.eviction,
    memory.lazyfree,
    memory.fragmentation,
    memory.memory_doctor,
    commands.dangerous,
    commands.slowlog,
    commands.latency,
    keys.big_keys,
    keys.no_ttl,
    keys.long_names,
    server.persistence,
    server.replication,
    server.client_buffers,
    server.cluster_slots,
)
BY_CODE: dict[str, Rule] = {r.code: r for r in RULES}
