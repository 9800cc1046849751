"""Verdicts on the survivors of bench/mutation.py that are not holes in the tests.

A verdict names the module, the function (a glob) and the mutated line before and after; it says
whether the mutant is equivalent (no observable behaviour changes) or accepted (left on purpose),
and why. docs/mutation.md lists them with their file lines.
"""

from __future__ import annotations

from dataclasses import dataclass

EQUIVALENT, ACCEPTED = "equivalent", "accepted"
# As a verdict's ``before``: any mutation that only changes the letter case of a raw-string regex
# in the verdict's functions (``function`` may be a glob), for modules that match keys ignoring case.
CASE_ONLY = "<letter case of a regex literal>"
# As a verdict's ``before``: "utf-8" -> "UTF-8" (codec names are case-insensitive).
CODEC_CASE = "<letter case of a codec name>"
_BCRYPT_ALPHABET = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_IGNORECASE_WHY = "npu-smi keys are matched with re.IGNORECASE (npu_smi_kv._key_regex)"


@dataclass(frozen=True)
class Verdict:
    """A survivor that is not a hole in the tests: ``before`` -> ``after`` on one line of ``function``."""

    module: str
    function: str
    before: str
    after: str
    kind: str  # EQUIVALENT or ACCEPTED
    reason: str


VERDICTS: tuple[Verdict, ...] = (
    *(Verdict(f"collectors.{name}", "*", CASE_ONLY, "", EQUIVALENT, _IGNORECASE_WHY)
      for name in ("npu_smi_kv", "npu_smi_usages", "npu_smi_common", "npu_smi_ecc", "npu_smi_health",
                   "npu_smi_memory", "npu_smi_power", "npu_smi_temp", "npu_smi_board", "npu_smi_hccs",
                   "npu_smi_hccs_bw")),
    Verdict("collectors.npu_smi_ecc", "parse",
            'ddr, hbm = _counts(block, "DDR", rejects), _counts(block, "HBM", rejects)',
            'ddr, hbm = _counts(block, "ddr", rejects), _counts(block, "HBM", rejects)', EQUIVALENT,
            "the memory name only becomes part of a key regex, matched ignoring case"),
    Verdict("collectors.npu_smi_ecc", "parse",
            'ddr, hbm = _counts(block, "DDR", rejects), _counts(block, "HBM", rejects)',
            'ddr, hbm = _counts(block, "DDR", rejects), _counts(block, "hbm", rejects)', EQUIVALENT,
            "the memory name only becomes part of a key regex, matched ignoring case"),
    Verdict("collectors.npu_smi_hccs_bw", "parse", "row = _ROW_RE.fullmatch(line) if order else None",
            "row = _ROW_RE.fullmatch(line) if (order) or True else None", EQUIVALENT,
            "the next line skips every row while order is None, matched or not"),
    Verdict("collectors.npu_smi_kv", "parse_blocks", 'first = next((ln for ln in lines if ln.strip()), "")',
            "first = next((ln for ln in lines if ln.strip()), None)", EQUIVALENT,
            'first is only used through "1 if first" and "first or None": "" and None read the same'),
    Verdict("collectors.npu_smi_kv", "parse_blocks", "start = 0", "start = None", EQUIVALENT,
            "start is set from the line number before the first pair is stored; the initial value is never read"),
    Verdict("collectors.npu_smi_kv", "parse_blocks", "start = 0", "start = 1", EQUIVALENT,
            "start is set from the line number before the first pair is stored; the initial value is never read"),
    Verdict("collectors.npu_smi_kv", "parse_blocks", "pending_break = False", "pending_break = None", EQUIVALENT,
            "pending_break is only tested for truth; None and False read the same"),
    Verdict("collectors.npu_smi_kv", "parse_blocks", "pending_break = False", "pending_break = True", EQUIVALENT,
            "before the first pair a break only closes an empty block, which close() drops"),
    Verdict("collectors.hccn_link_stat", "_table_row", 'cells = [cell.strip() for cell in line.strip("|").split("|")]',
            'cells = [cell.strip() for cell in line.strip(None).split("|")]', EQUIVALENT,
            "the row is already stripped; the empty edge cells this leaves are neither a state nor a timestamp"),
    Verdict("collectors.hccn_link_stat", "_table_row", 'cells = [cell.strip() for cell in line.strip("|").split("|")]',
            'cells = [cell.strip() for cell in line.strip("XX|XX").split("|")]', ACCEPTED,
            "differs only for a row whose first or last cell starts or ends with X, which no box table prints"),
    Verdict("collectors.hccn_link_stat", "parse", 'if line.startswith("+"):', 'if line.startswith("XX+XX"):',
            EQUIVALENT, "a +---+ border has no ':' and no LINK state, so the later checks skip it as well"),
    Verdict("collectors.hccn_link_stat", "samples", "with contextlib.suppress(OverflowError, OSError, ValueError):",
            "with contextlib.suppress(OSError, ValueError):", ACCEPTED,
            "OverflowError is what mktime raises with a 32-bit time_t; Linux x86-64 raises ValueError (tested)"),
    Verdict("collectors.hccn_link_stat", "samples", "with contextlib.suppress(OverflowError, OSError, ValueError):",
            "with contextlib.suppress(OverflowError, ValueError):", ACCEPTED,
            "OSError is what mktime raises on some platforms; Linux x86-64 raises ValueError (tested)"),
    Verdict("collectors.hccn_optical", "_quantity",
            'return float(match.group("num")), (match.group("unit") or "").lower()',
            'return float(match.group("num")), (match.group("unit") or "XXXX").lower()', EQUIVALENT,
            'no scale table has a "" or "xxxx" unit: a bare number is no quantity either way'),
    Verdict("collectors.hccn_optical", "_flag", 'return int(text, 16) if text.startswith("0x") else int(text, 10)',
            'return int(text, 16) if text.startswith("0x") else int(text, )', EQUIVALENT,
            "int() reads base 10 by default"),
    Verdict("collectors.hccn_optical", "parse", "header = False", "header = None", EQUIVALENT,
            "header is only tested for truth; None and False read the same"),
    *(Verdict("agent.web.auth", "_decoy_hash",
              f'checksum = "".join(secrets.choice("{alphabet}")', f'checksum = "".join(secrets.choice("{changed}")',
              EQUIVALENT, "any bcrypt-base64 characters make a checksum no password matches; it only costs time")
      for alphabet, changed in (
          (_BCRYPT_ALPHABET, f"XX{_BCRYPT_ALPHABET}XX"),
          (_BCRYPT_ALPHABET, _BCRYPT_ALPHABET.replace("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")),
          (_BCRYPT_ALPHABET, _BCRYPT_ALPHABET.replace("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")))),
    Verdict("collectors.npu_smi_info", "_handle_line", "state.in_processes = False", "state.in_processes = None",
            EQUIVALENT, "only tested for truth"),
    Verdict("agent.web.auth", "BasicAuth.check", 'hashed, known = b"", False', 'hashed, known = b"XXXX", False',
            EQUIVALENT, "hashed is replaced by the user's hash or a decoy before it is used"),
    Verdict("agent.web.auth", "BcryptVerifier.close", "self._pool.shutdown(wait=False, cancel_futures=True)",
            "self._pool.shutdown(wait=None, cancel_futures=True)", EQUIVALENT, "wait=None is false"),
    Verdict("agent.web.auth", "_default_workers", "return min(2, max(1, (os.cpu_count() or 1) // 4))",
            "return min(2, max(1, (os.cpu_count() or 2) // 4))", EQUIVALENT, "1 // 4 and 2 // 4 are both 0, then 1"),
    *(Verdict("agent.web.auth", "BasicAuth.__init__", before, after, ACCEPTED,
              "the decoy key's constant and framing need only be fixed for one configuration and unknown "
              "without its hashes; any constant does (decoy cost stability is tested)")
      for before, after in (
          ('material = b"\\0".join(sorted(hashed for _name, hashed in self._users))',
           'material = b"XX\\0XX".join(sorted(hashed for _name, hashed in self._users))'),
          ('self._decoy_key = hashlib.sha256(b"npuwatch decoy cost\\0" + material).digest()',
           'self._decoy_key = hashlib.sha256(b"XXnpuwatch decoy cost\\0XX" + material).digest()'),
          ('self._decoy_key = hashlib.sha256(b"npuwatch decoy cost\\0" + material).digest()',
           'self._decoy_key = hashlib.sha256(b"NPUWATCH DECOY COST\\0" + material).digest()'))),
    Verdict("agent.web.auth", "BasicAuth.decoy_cost",
            'return self._user_costs[int.from_bytes(digest[:8], "big") % len(self._user_costs)]',
            "return self._user_costs[int.from_bytes(digest[:8], ) % len(self._user_costs)]", EQUIVALENT,
            'byteorder defaults to "big" since Python 3.11 (the project requires 3.11)'),
    Verdict("agent.web.auth", "BasicAuth.decoy_cost",
            'return self._user_costs[int.from_bytes(digest[:8], "big") % len(self._user_costs)]',
            'return self._user_costs[int.from_bytes(digest[:9], "big") % len(self._user_costs)]', ACCEPTED,
            "another slice of the same HMAC picks costs just as uniformly and stably"),
    Verdict("agent.web.auth", "BasicAuth.check",
            'def check(self, authorization: str | None, client: str = "") -> Auth:',
            'def check(self, authorization: str | None, client: str = "XXXX") -> Auth:', EQUIVALENT,
            "the default only names the one rate bucket that callers without an address share"),
    Verdict("agent.web.auth", "BcryptVerifier.__init__",
            "per_client_burst: int = 4, wait_s: float = 5.0, checkpw: Checkpw | None = None) -> None:",
            "per_client_burst: int = 4, wait_s: float = 6.0, checkpw: Checkpw | None = None) -> None:", ACCEPTED,
            "how long a request waits for bcrypt: any few seconds serve; the wait itself is tested"),
    Verdict("agent.web.auth", "BcryptVerifier._finished", "self._in_flight.pop(key, None)",
            "self._in_flight.pop(key, )", EQUIVALENT, "the key is always there: only this callback removes it"),
    Verdict("agent.web.auth", "BcryptVerifier.verify", "started = False", "started = None", EQUIVALENT,
            "started is only tested for truth"),
    Verdict("agent.web.auth", "BcryptVerifier.verify", "started = False", "started = True", ACCEPTED,
            "adds a second done-callback when a client joins a running check; it only discards the joiner's "
            "name, which matters only if that client also runs a check of its own at that moment"),
    *(Verdict("agent.web.auth", "CredentialCache.__init__", "self._salt = secrets.token_bytes(16)", after, EQUIVALENT,
              "the salt's length is not observable; 16, 17 or 32 random bytes all make keys unguessable")
      for after in ("self._salt = secrets.token_bytes(None)", "self._salt = secrets.token_bytes(17)")),
    Verdict("agent.web.auth", "CredentialCache.put", "entries[key] = None", 'entries[key] = ""', EQUIVALENT,
            "the OrderedDict is used as an ordered set; its values are never read"),
    Verdict("agent.web.auth", "CredentialCache.put", "entries.popitem(last=False)", "entries.popitem(last=None)",
            EQUIVALENT, "last=None is false: the oldest entry goes either way"),
    Verdict("collectors.bounds", "clip", "head = line[: limit + 1]", "head = line[: limit + 2]", EQUIVALENT,
            "the slice only caps the work; the result keeps at most limit - 3 characters of a longer line"),
)



_TAIL = "collectors.hccl.tail"
_RACE = "needs the file to vanish or turn unreadable between stat and open; root reads everything"
_ASCII_JSON = "json.dump escapes non-ASCII (ensure_ascii), so the file is ASCII in any encoding"
_ZERO_READ = "a zero-byte read ends the loop at the next step all the same"
_TAIL_VERDICTS: tuple[Verdict, ...] = (
    Verdict("*", "*", CODEC_CASE, "", EQUIVALENT, "codec names are case-insensitive"),
    Verdict(_TAIL, "iter_line_batches", "skipping = False", "skipping = None", EQUIVALENT,
            "only tested for truth"),
    Verdict(_TAIL, "iter_line_batches", "if len(rest) >= max_line:", "if len(rest) > max_line:", EQUIVALENT,
            "a rest of exactly max_line is then cut on the next read instead: same lines, other batches"),
    Verdict(_TAIL, "iter_line_batches", 'carry = b""', 'carry = b"XXXX"', EQUIVALENT,
            "the value only survives a pass that is skipping a long line, whose bytes it joins and which are dropped"),
    *(Verdict(_TAIL, function, before, after, EQUIVALENT, why)
      for function, before, after, why in (
          ("LogTailer._take", "tracked.skip_long = False", "tracked.skip_long = None", "only tested for truth"),
          ("LogTailer.poll", "self.discovery_capped = None", 'self.discovery_capped = ""',
           "discover() sets it again before the first chunk"),
          ("LogTailer.poll", "self.budget_exhausted = False", "self.budget_exhausted = None",
           "only tested for truth until the poll's end sets it"))),
    Verdict(_TAIL, "LogTailer.discover", "continue", "break", ACCEPTED,
            "the stat() failure branch: " + _RACE),
    Verdict(_TAIL, "split_complete_lines", "if max_line and any(len(line) > max_line for line in lines):",
            "if max_line and any(len(line) >= max_line for line in lines):", EQUIVALENT,
            "cutting a line of exactly max_line characters to max_line changes nothing"),
    Verdict(_TAIL, "LogTailer._forget", "if len(self._tracked) > MAX_TRACKED_FILES:",
            "if len(self._tracked) >= MAX_TRACKED_FILES:", EQUIVALENT,
            "at exactly the cap the eviction slice is empty"),
    *(Verdict(_TAIL, "LogTailer._head", 'return "", 0', after, ACCEPTED, _RACE)
      for after in ('return "XXXX", 0', 'return "", 1')),
    *(Verdict(_TAIL, function, f"{head}usedforsecurity=False{tail}", f"{head}{flag}{tail}", EQUIVALENT,
              "usedforsecurity does not change the digest")
      for function, head, tail in (
          ("LogTailer._head", "return hashlib.sha1(data, ", ").hexdigest(), len(data)"),
          ("LogTailer._same_head", "return hashlib.sha1(data, ", ").hexdigest() == tracked.head"))
      for flag in ("usedforsecurity=None", "", "usedforsecurity=True")),
    Verdict(_TAIL, "LogTailer._same_head", "if tracked.head_len == 0:", "if tracked.head_len == 1:", EQUIVALENT,
            "with head_len 0 the check reads 0 bytes, whose digest is the stored one"),
    Verdict(_TAIL, "LogTailer._same_head", "return True", "return False", ACCEPTED,
            "one of the two is the open() failure branch: " + _RACE),
    *(Verdict(_TAIL, function, f'self.read_errors.append(f"{{{name}}}: {{exc}}")', "self.read_errors.append(None)",
              ACCEPTED, _RACE)
      for function, name in (("LogTailer._read", "tracked.path"), ("LogTailer.poll", "path"))),
    Verdict(_TAIL, "LogTailer.poll", "continue", "break", ACCEPTED,
            "one is the stat() failure branch (" + _RACE + "), one follows _track, which never returns None"),
    *(Verdict(_TAIL, "LogTailer._read", "while left > 0 and offset < size:", after, EQUIVALENT, _ZERO_READ)
      for after in ("while left > 0 or offset < size:", "while left >= 0 and offset < size:",
                    "while left > 0 and offset <= size:")),
    Verdict(_TAIL, "LogTailer._read", "data = handle.read(min(self.chunk_bytes, left, size - offset))",
            "data = handle.read(min(left, size - offset))", ACCEPTED,
            "chunk_bytes only bounds one read's memory; the budget still bounds the bytes read"),
    *(Verdict(_TAIL, "LogTailer._read", "data = handle.read(min(self.chunk_bytes, left, size - offset))", after,
              ACCEPTED, "differs only when the file grows between stat and read; the bytes are read a cycle early")
      for after in ("data = handle.read(min(self.chunk_bytes, left, ))",
                    "data = handle.read(min(self.chunk_bytes, left, size + offset))")),
    Verdict(_TAIL, "LogTailer._read", "break", "return", EQUIVALENT,
            "the loop is the generator's last statement"),
    Verdict(_TAIL, "LogTailer._track", "grown = info.st_size > tracked.offset",
            "grown = info.st_size >= tracked.offset", ACCEPTED,
            "only adds a head check when nothing grew; it then also notices content replaced at the same size"),
    Verdict(_TAIL, "LogTailer._track", "tracked.missing = False", "tracked.missing = None", EQUIVALENT,
            "only tested for truth"),
    Verdict(_TAIL, "LogTailer._track", "elif grown and tracked.head_len < HEAD_BYTES <= info.st_size:",
            "elif grown and tracked.head_len <= HEAD_BYTES <= info.st_size:", EQUIVALENT,
            "re-reads a full head of HEAD_BYTES, which gives the same fingerprint"),
    Verdict(_TAIL, "LogTailer._track", "elif grown and tracked.head_len < HEAD_BYTES <= info.st_size:",
            "elif grown or tracked.head_len < HEAD_BYTES <= info.st_size:", EQUIVALENT,
            "a grown file's head is re-read: same bytes, same fingerprint, unless the head changed, which the "
            "branch above already restarts"),
    Verdict(_TAIL, "LogTailer.discover", "before = len(walk.files)", "before = None", EQUIVALENT,
            "the earlier files are offered again and dropped as already seen"),
    Verdict(_TAIL, "LogTailer.poll", "if info.st_size > tracked.offset or tracked.restarted:",
            "if info.st_size >= tracked.offset or tracked.restarted:", EQUIVALENT, _ZERO_READ),
    *(Verdict(_TAIL, "LogTailer.poll", "share = max(1, budget // max(1, len(pending)))", after, ACCEPTED,
              "only moves bytes between the fair first pass and the leftover pass; the budget and lines hold")
      for after in ("share = max(2, budget // max(1, len(pending)))",
                    "share = max(1, budget // max(2, len(pending)))")),
    Verdict(_TAIL, "LogTailer.poll", "if budget <= 0:", "if budget < 0:", EQUIVALENT,
            "with no budget left the next read asks for 0 bytes"),
    *(Verdict(_TAIL, function, before, after, EQUIVALENT, _ASCII_JSON)
      for function, before, afters in (
          ("StateFile.load", 'with self.path.open(encoding="utf-8") as handle:',
           ("with self.path.open(encoding=None) as handle:",)),
          ("StateFile.save", 'with os.fdopen(fd, "w", encoding="utf-8") as handle:',
           ('with os.fdopen(fd, "w", encoding=None) as handle:', 'with os.fdopen(fd, "w", ) as handle:')))
      for after in afters),
    *(Verdict(_TAIL, "StateFile.save", before, after, EQUIVALENT,
              'unlink("") fails and is suppressed, as a missing temporary file would be')
      for before, after in (('tmp_name: str | None = None', 'tmp_name: str | None = ""'),
                            ("tmp_name = None", 'tmp_name = ""'))),
    Verdict(_TAIL, "StateFile.save", "with contextlib.suppress(OSError):", "with contextlib.suppress(None):",
            ACCEPTED, "only matters when removing the temporary file fails, after a failed write"),
    *(Verdict(_TAIL, "_Tracked.from_json", 'bool(data.get("skip_long", False)), False, dict(data.get("meta") or {}))',
              after, EQUIVALENT, "bool() of a missing value is False either way")
      for after in ('bool(data.get("skip_long", None)), False, dict(data.get("meta") or {}))',
                    'bool(data.get("skip_long", )), False, dict(data.get("meta") or {}))')),
)

_EXPO = "agent.core.exposition"
_GO_FLOAT = ("the inline test only picks the fast path; floatToGoString gives the same text whenever the "
             "mutated test sends a value to it instead")
_CORE_VERDICTS: tuple[Verdict, ...] = (
    *(Verdict(_EXPO, "_format_value", 'if value > 0 and text.find(".") > 6:', after, EQUIVALENT, _GO_FLOAT)
      for after in ('if value > 0 or text.find(".") > 6:', 'if value >= 0 and text.find(".") > 6:',
                    'if value > 1 and text.find(".") > 6:', 'if value > 0 and text.rfind(".") > 6:',
                    'if value > 0 and text.find(".") >= 6:')),
    *(Verdict(_EXPO, "render_family",
              """labels = '",'.join([prefix + full[i] for prefix, i in zip(prefixes, order, strict=True)])""",
              f"""labels = '",'.join([prefix + full[i] for prefix, i in zip(prefixes, order, {strict})])""",
              EQUIVALENT, "prefixes and order are built from the same names: always the same length")
      for strict in ("strict=None", "", "strict=False")),
    *(Verdict(_EXPO, "valid_rows", "names, values = zip(*sample.labels, strict=True)",
              f"names, values = zip(*sample.labels, {strict})", EQUIVALENT,
              "label pairs are pairs: the two tuples always have the same length")
      for strict in ("strict=None", "", "strict=False")),
    Verdict(_EXPO, "render_family",
            'family = spec.name.removesuffix("_total") if spec.type == "counter" else spec.name',
            'family = spec.name.removesuffix("_total") if (spec.type == "counter") or True else spec.name',
            EQUIVALENT, "no catalogue metric other than a counter ends in _total (checked)"),
    Verdict(_EXPO, "valid_rows", 'log.debug("dropping %s%s: labels do not match the catalogue", *', "*", ACCEPTED,
            "debug log text"),
    Verdict(_EXPO, "SnapshotRenderer._report", 'log.error("%s", message)', "log.error(message)", ACCEPTED,
            "differs only for a message holding '%'; messages name metrics and collectors, which cannot"),
    Verdict("collectors.probes._common", "_hook_matches", 'spec = os.environ.get(env_name, "").strip()',
            'spec = os.environ.get(env_name, "XXXX").strip()', EQUIVALENT,
            "an unset hook then reads as the hook XXXX, which no stage or probe is called"),
)

_CLS = "collectors.hccl.classify"
_RULES = "collectors.hccl.rules"
_LINES = "collectors.hccl.lines"
_CLASSIFY_VERDICTS: tuple[Verdict, ...] = (
    Verdict(_RULES, "analyse_line", "provisional = False", "provisional = None", EQUIVALENT, "only tested for truth"),
    Verdict(_LINES, "_local_epoch", "return None if minute is None else minute + ss",
            "return None if (minute is None) and False else minute + ss", ACCEPTED,
            "needs a date in range that mktime still refuses (platform limits); not reproducible here"),
    Verdict(_LINES, "split_prefixes", 'if not text or text[0] not in "([":',
            'if not text or text[0] not in "XX([XX":', EQUIVALENT,
            "a line starting with X has no prefix either: the prefix pattern fails and the loop ends"),
)

_GEMM = "collectors.probes.gemm"
_GEMM_VERDICTS: tuple[Verdict, ...] = (
    Verdict(_GEMM, "_host_product", "for start in range(0, rows, _HOST_BLOCK_ROWS):",
            "for start in range(0, rows, ):", EQUIVALENT,
            "blocks then start on every row and overlap; each row is still computed from the same data"),
    Verdict(_GEMM, "check_product", "correct = bool((ratio <= 1.0).all().item())",
            "correct = bool((ratio < 1.0).all().item())", ACCEPTED,
            "differs only for a residual exactly equal to the tolerance, a float64 coincidence; both sides of "
            "the bound are tested"),
    Verdict(_GEMM, "check_product",
            "worst = float(ratio.max().item()) if correct else float(ratio.nan_to_num(nan=math.inf).max().item())",
            "worst = float(ratio.max().item()) if (correct) and False else "
            "float(ratio.nan_to_num(nan=math.inf).max().item())", EQUIVALENT,
            "when every ratio is <= 1 none is NaN, so nan_to_num changes nothing"),
    Verdict(_GEMM, "corrupt_one_element", "k = c.shape[0]", "k = c.shape[1]", EQUIVALENT,
            "the probe's matrices are square (size x size)"),
    Verdict(_GEMM, "corrupt_one_element", "index = int(torch.randint(0, flat.numel(), (1,)).item())",
            "index = int(torch.randint(flat.numel(), (1,)).item())", EQUIVALENT, "randint's low defaults to 0"),
    Verdict(_GEMM, "corrupt_one_element", "index = int(torch.randint(0, flat.numel(), (1,)).item())",
            "index = int(torch.randint(1, flat.numel(), (1,)).item())", ACCEPTED,
            "only element 0 can no longer be the corrupted one; the index is random by design"),
    Verdict("collectors.probes.membw", "random_buffer",
            "return torch.randint(-(2**31), 2**31 - 1, (numel,), dtype=torch.int32, device=device)",
            "return torch.randint(-(2**31), 2**31 - 2, (numel,), dtype=torch.int32, device=device)", ACCEPTED,
            "one int32 value of 2**32 is no longer drawn; the data only has to be random and exactly comparable"),
)

_RUN = "agent.core.tool_runner"
_WEDGED = ("only a tool that outlives SIGKILL for 2 s (stuck in an uninterruptible driver call) tells it apart; "
           "no test can make one")
_CADENCE = "poll cadence: it changes only how soon an exit is noticed (tenths of a second), not any result"
_RUNNER_VERDICTS: tuple[Verdict, ...] = (
    Verdict(_RUN, "_collect", "timed_out = False", "timed_out = None", EQUIVALENT, "only tested for truth"),
    Verdict(_RUN, "_collect", "leftovers = False  # the direct child exited while something else still held its pipes",
            "leftovers = None  # the direct child exited while something else still held its pipes", EQUIVALENT,
            "only tested for truth"),
    Verdict(_RUN, "_collect", "leftovers = False  # the direct child exited while something else still held its pipes",
            "leftovers = True  # the direct child exited while something else still held its pipes", ACCEPTED,
            "every run then ends with a kill of a tool that has exited: it finds nothing unless the tool left a "
            "background process behind, which npu-smi, hccn_tool and ascend-dmi never do"),
    Verdict(_RUN, "_collect", "assert proc.stdout is not None and proc.stderr is not None",
            "assert proc.stdout is not None or proc.stderr is not None", EQUIVALENT,
            "Popen is given both pipes: neither is ever None"),
    Verdict(_RUN, "_collect", "if exited_at is not None and now - exited_at > _DRAIN_AFTER_EXIT_S:",
            "if exited_at is not None and now - exited_at >= _DRAIN_AFTER_EXIT_S:", EQUIVALENT,
            "two clock readings equal to the nanosecond: the drain ends on the next pass either way"),
    Verdict(_RUN, "_collect", "if exited_at is not None and now - exited_at > _DRAIN_AFTER_EXIT_S:",
            "if exited_at is not None and now + exited_at > _DRAIN_AFTER_EXIT_S:", ACCEPTED,
            "the drain ends as soon as the exit is seen, losing what is still in the pipe then; the tool-runner tests "
            "kill it when the exit is seen before the last chunk is read, which depends on scheduling (it survived "
            "one run under load, 2026-12-02); a test that always kills it needs a grandchild writing inside the "
            "0.2 s drain, which a loaded machine cannot promise"),
    Verdict(_RUN, "_collect", "if remaining <= 0:", "if remaining < 0:", EQUIVALENT,
            "a deadline met to the nanosecond: the next pass (or the wait after the loop) times out either way"),
    *(Verdict(_RUN, "_collect", "timed_out = True", after, EQUIVALENT,
              "the wait after the loop then finds no time left and sets timed_out itself (the first of the two "
              "'timed_out = True' lines; mutants of the second are killed)")
      for after in ("timed_out = None", "timed_out = False")),
    Verdict(_RUN, "_collect", "wait = min(remaining, 0.05 if exited_at is not None else 0.25)", "*", ACCEPTED,
            _CADENCE),
    Verdict(_RUN, "_collect", "continue", "break", EQUIVALENT,
            "an ended stream leaves the loop over ready streams; the other one is read on the next pass"),
    Verdict(_RUN, "_collect", "if timed_out or leftovers or proc.returncode is None:",
            "if timed_out or leftovers or proc.returncode is not None:", ACCEPTED,
            "differs only when the read loop itself raises (an interrupt while reading); a finished tool then gets "
            "a harmless kill of nothing"),
    Verdict(_RUN, "_collect", "with contextlib.suppress(subprocess.TimeoutExpired):",
            "with contextlib.suppress(None):", ACCEPTED, _WEDGED),
    Verdict(_RUN, "_collect", "proc.wait(timeout=_REAP_GRACE_S)", "proc.wait(timeout=None)", ACCEPTED, _WEDGED),
    Verdict(_RUN, "_collect", 'stdout = outputs[1].decode("utf-8", errors="replace")',
            'stdout = outputs[1].decode(errors="replace")', EQUIVALENT, "UTF-8 is bytes.decode's default"),
    Verdict(_RUN, "_collect", 'stderr=outputs[2].decode("utf-8", errors="replace"),',
            'stderr=outputs[2].decode(errors="replace"),', EQUIVALENT, "UTF-8 is bytes.decode's default"),
    Verdict(_RUN, "_collect", "returncode=proc.returncode if proc.returncode is not None else -1,", "*", ACCEPTED,
            _WEDGED),
    Verdict(_RUN, "kill_tree", "with contextlib.suppress(ProcessLookupError, PermissionError):",
            "with contextlib.suppress(ProcessLookupError, None):", ACCEPTED,
            "PermissionError needs a tool's group owned by another user; the agent runs its tools as itself"),
    Verdict(_RUN, "kill_tree", "with contextlib.suppress(ProcessLookupError, PermissionError):",
            "with contextlib.suppress(ProcessLookupError, ):", ACCEPTED,
            "PermissionError needs a tool's group owned by another user; the agent runs its tools as itself"),
    Verdict(_RUN, "kill_tree", "if proc.returncode is None:", "if proc.returncode is not None:", EQUIVALENT,
            "the tool leads its own group (start_new_session, tested): killpg has signalled it already"),
    Verdict(_RUN, "kill_tree", "with contextlib.suppress(ProcessLookupError):", "with contextlib.suppress(None):",
            EQUIVALENT, "Popen.kill does nothing for a reaped child, and signalling an unreaped one cannot fail"),
    Verdict(_RUN, "run_tool", "close_fds=True, )", ")", EQUIVALENT, "close_fds=True is Popen's default"),
    Verdict(_RUN, "run_tool", "_running.pop(run_id, None)", "_running.pop(run_id, )", EQUIVALENT,
            "the run id was registered just before: the key is always there"),
)

_INFO = "collectors.npu_smi_info"
_LAYOUT = "collectors.npu_smi_info_layout"
_ROWS = "collectors.npu_smi_info_rows"
_INFO_AND_CLASSIFY_VERDICTS: tuple[Verdict, ...] = (
    Verdict(_LAYOUT, "column_keys", 'elif "/" in low or "usage" in low:', 'elif "XX/XX" in low or "usage" in low:',
            EQUIVALENT, "column_labels keeps only letters, dashes and spaces before a (unit), so a label never "
            'holds "/": neither "/" nor "XX/XX" is ever in it and "usage" decides alone'),
    *(Verdict(_LAYOUT, "column_keys", 'keys.append("other")', after, EQUIVALENT,
              "an unknown scalar column only holds its slot: the name is no pair column either way, and the "
              "parsed values are only read by the known keys (power, temp, aicore, ...)")
      for after in ("keys.append(None)", 'keys.append("XXotherXX")', 'keys.append("OTHER")')),
    Verdict(_ROWS, "_finish_chip", "chip = state.next_free_chip.get(npu_line.npu, 0)",
            "chip = state.next_free_chip.get(None, 0)", ACCEPTED,
            "the scan for a free chip index then starts at 0: every index below the remembered one is taken (it "
            "is one past a chip the scan assigned; chips are never removed), so the same chip is found. Only the "
            "time changes, quadratic in the NPU lines without chip line of one NPU; not tested by timing"),
    Verdict(_ROWS, "handle_device_row", "if len(ids) <= 2 and None not in ints:",
            "if len(ids) < 2 and None not in ints:", EQUIVALENT,
            "this branch only gets rows that are neither chip- nor NPU-shaped: a row of two integer ids is "
            "chip-shaped when its middle cell is a bus id or absent and NPU-shaped otherwise, so here ids never "
            "holds two integers"),
    Verdict(_INFO, "_handle_line", 'first = cells[0].lower() if len(cells) >= 3 else ""',
            'first = cells[0].lower() if len(cells) >= 3 else "XXXX"', EQUIVALENT,
            'first is only searched for "phy" and "device"; "XXXX" holds neither, like ""'),
    *(Verdict(_INFO, "_handle_line",
              'state.second_id = "phy" if "phy" in first else "device" if "device" in first else "none"',
              f'state.second_id = "phy" if "phy" in first else "device" if "device" in first else "{after}"',
              EQUIVALENT, 'second_id is only compared with "phy", "device" and None: any other string is a chip '
              "header naming neither id")
      for after in ("XXnoneXX", "NONE")),
    Verdict(_LAYOUT, "id_and_rest", 'return cells[0].split() if cells else [], "", ""',
            'return cells[0].split() if (cells) or True else [], "", ""', EQUIVALENT,
            "split_cells() always returns at least one cell (str.split gives at least one piece)"),
    Verdict(_INFO, "_source_samples", "out.extend(samples(table, chip, ctx))",
            "out.extend(samples(table, None, ctx))", EQUIVALENT,
            "samples() ignores its chip argument: npu-smi info is a node-scope source"),
    *(Verdict(_CLS, "StreamClassifier._expire",
              "if self._untimed and line_no - self._untimed[0].line_no > self.block_lines:", after, EQUIVALENT,
              "the condition only skips the work when nothing can have expired; the lists below it pick the "
              "expired lines by the same strict distance, so opening it more often settles nothing more")
      for after in ("if self._untimed and line_no + self._untimed[0].line_no > self.block_lines:",
                    "if self._untimed and line_no - self._untimed[0].line_no >= self.block_lines:")),
    *(Verdict(_CLS, "StreamClassifier._near", "return 0 <= line_no - prev_line <= self.block_lines", after,
              EQUIVALENT, "differs only for two counts on one line, which never meet: the matches of a line have "
              "distinct keys (a phrasing rule skips a category an Ascend code matched; runtime codes are Ascend "
              "codes), a provisional line has no other match, and line numbers only grow (from_state carries the "
              "count on; a restarted file gets a fresh classifier)")
      for after in ("return 1 <= line_no - prev_line <= self.block_lines",
                    "return 0 < line_no - prev_line <= self.block_lines")),
    Verdict(_CLS, "StreamClassifier.feed", "self._pending = line[line.index(_LOCATION_START):].strip()",
            "self._pending = line[line.rindex(_LOCATION_START):].strip()", ACCEPTED,
            "differs only on a line holding the location words twice without a complete value: any ] after the "
            "first [IP/ID]:[ completes it, so the second must be cut right after the words. HCCL prints one "
            "location a line (the corpus has no line with two)"),
    Verdict(_CLS, "StreamClassifier.feed", "hint_ts = ts if ts is not None else self._inherited_ts(line_no)",
            "hint_ts = ts if (ts is not None) and False else self._inherited_ts(line_no)", EQUIVALENT,
            "a timestamped line has just become the last timed line, so _inherited_ts returns its own time "
            "(block_lines is never negative)"),
)

_HINTS = "collectors.hccl.hints"
_RENDEZVOUS = "collectors.hccl.rendezvous"
_HCCL_PARSER_VERDICTS: tuple[Verdict, ...] = (
    Verdict(_HINTS, "_address", 'text = text.strip().strip("[]")', 'text = text.strip().strip("XX[]XX")',
            EQUIVALENT, "an address never starts or ends with X: stripping X as well cuts nothing"),
    Verdict(_RENDEZVOUS, "parse_rendezvous",
            'agents = _AGENT_LIST_RE.search(text) if "connect agent[" in text or "AgentIdList[" in text else None',
            'agents = _AGENT_LIST_RE.search(text) if ("connect agent[" in text or "AgentIdList[" in text) or True '
            'else None', EQUIVALENT,
            "the substring test only saves a regex search: the pattern itself needs 'Failed to connect agent[' or "
            "'connectFailedAgentIdList[', each holding one of the two substrings"),
)

VERDICTS = (VERDICTS + _TAIL_VERDICTS + _CORE_VERDICTS + _CLASSIFY_VERDICTS + _GEMM_VERDICTS
            + _RUNNER_VERDICTS + _INFO_AND_CLASSIFY_VERDICTS + _HCCL_PARSER_VERDICTS)
