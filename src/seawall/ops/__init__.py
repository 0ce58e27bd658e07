"""Operations commands for a live Redis or Valkey: `seawall stats`, `bigkeys`, `hotkeys`,
`delete --pattern`, `doctor` and `slot`.

Pure cores (INFO parsing, percentiles, the rate limit, slot hashing, the doctor's rules)
live beside thin I/O (`_connect`, `_scan`); each command's CLI module in `seawall.cli`
only parses options and prints.
"""
