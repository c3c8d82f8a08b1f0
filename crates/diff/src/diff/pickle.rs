//! A pickle is a program: `GLOBAL` names any Python callable and `REDUCE` calls it. phantom never runs one (the
//! tensors are read by `pytorch-reader`, a parser), and before reading it walks the opcodes and refuses any pickle
//! that names something beyond tensors and containers, so a malicious file is a clear error, not a silent skip.

/// Module prefixes a tensor checkpoint names: torch's tensor and storage rebuilders, `OrderedDict`, and the
/// builtins/codecs pickle itself uses for containers and bytes.
const ALLOWED: [&str; 5] = ["torch", "collections", "builtins", "_codecs", "__builtin__"];

/// Names a torch checkpoint never needs even from the allowed modules.
const DENIED: [&str; 4] = ["eval", "exec", "getattr", "__import__"];

fn allowed(module: &str, name: &str) -> bool {
    let top = module.split('.').next().unwrap_or("");
    ALLOWED.contains(&top) && !DENIED.contains(&name) && !module.starts_with("torch.hub")
}

/// Bytes of the argument of a fixed-size opcode, or `None` for other opcodes.
fn fixed(op: u8) -> Option<usize> {
    Some(match op {
        b'J' => 4,
        b'K' | b'h' | b'q' | 0x80 | 0x82 => 1,
        b'M' | 0x83 => 2,
        b'G' | 0x95 => 8,
        b'j' | b'r' | 0x84 => 4,
        _ => return None,
    })
}

/// Width of the length prefix of a counted opcode, or `None`.
fn counted(op: u8) -> Option<usize> {
    Some(match op {
        b'T' | b'X' | b'B' | 0x8b => 4,
        b'U' | 0x8c | b'C' | 0x8a => 1,
        0x8d | 0x8e | 0x96 => 8,
        _ => return None,
    })
}

/// Opcodes without an argument.
const BARE: &[u8] = b"(.012NRb}e]adsutl)o\x81\x85\x86\x87\x88\x89Q\x8f\x90\x91\x92\x93\x94\x97\x98";

/// The callables the pickle at the start of `bytes` names that a tensor checkpoint does not need (`module.name`),
/// and the length of that pickle; an error when the bytes are not a pickle phantom can walk.
pub fn scan(bytes: &[u8]) -> Result<(Vec<String>, usize), String> {
    let mut bad = vec![];
    let mut strings: Vec<String> = vec![];
    let mut at = 0usize;
    let take = |at: &mut usize, n: usize| -> Result<&[u8], String> {
        let s = bytes
            .get(*at..at.saturating_add(n))
            .ok_or("the pickle is truncated")?;
        *at += n;
        Ok(s)
    };
    let line = |at: &mut usize| -> Result<String, String> {
        let rest = bytes.get(*at..).ok_or("the pickle is truncated")?;
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("the pickle is truncated")?;
        *at += end + 1;
        Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
    };
    while at < bytes.len() {
        let op = bytes[at];
        at += 1;
        match op {
            b'.' => return Ok((bad, at)),
            b'c' | b'i' => {
                let (module, name) = (line(&mut at)?, line(&mut at)?);
                if !allowed(&module, &name) {
                    bad.push(format!("{module}.{name}"));
                }
            }
            0x93 => {
                let n = strings.len();
                if n < 2 {
                    return Err("STACK_GLOBAL without its module and name".into());
                }
                let (module, name) = (&strings[n - 2], &strings[n - 1]);
                if !allowed(module, name) {
                    bad.push(format!("{module}.{name}"));
                }
            }
            0x82..=0x84 => {
                return Err("the pickle uses the extension registry (EXT opcodes)".into())
            }
            b'I' | b'L' | b'F' | b'P' | b'g' | b'p' | b'S' | b'V' => {
                let s = line(&mut at)?;
                if matches!(op, b'S' | b'V') {
                    strings.push(s.trim_matches(|c| c == '\'' || c == '"').to_string());
                }
            }
            _ if BARE.contains(&op) => {}
            _ => {
                if let Some(n) = fixed(op) {
                    take(&mut at, n)?;
                } else if let Some(w) = counted(op) {
                    let raw = take(&mut at, w)?;
                    let mut len = [0u8; 8];
                    len[..w].copy_from_slice(raw);
                    let n =
                        usize::try_from(u64::from_le_bytes(len)).map_err(|_| "absurd length")?;
                    let arg = take(&mut at, n)?;
                    if matches!(op, b'X' | 0x8c | 0x8d | b'T' | b'U') {
                        strings.push(String::from_utf8_lossy(arg).into_owned());
                    }
                } else {
                    return Err(format!(
                        "unknown pickle opcode 0x{op:02x} at byte {}",
                        at - 1
                    ));
                }
            }
        }
    }
    Err("the pickle is truncated (no STOP)".into())
}

/// [`scan`] of the callables only.
pub fn forbidden_globals(bytes: &[u8]) -> Result<Vec<String>, String> {
    scan(bytes).map(|(bad, _)| bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_to_os_system_is_named() {
        // pickle.dumps of an object whose __reduce__ returns (os.system, ("echo hi",)), protocol 2.
        let p = b"\x80\x02cposix\nsystem\nq\x00X\x07\x00\x00\x00echo hiq\x01\x85q\x02Rq\x03.";
        assert_eq!(forbidden_globals(p).unwrap(), ["posix.system"]);
    }

    #[test]
    fn torch_rebuilders_and_ordered_dicts_pass() {
        let p = b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01X\x01\x00\x00\x00a\x8c\x0ctorch._utils\x8c\x12_rebuild_tensor_v2\x93.";
        assert!(forbidden_globals(p).unwrap().is_empty());
    }

    #[test]
    fn a_truncated_pickle_is_an_error() {
        assert!(forbidden_globals(b"\x80\x02X\xff\x00\x00\x00ab").is_err());
    }
}
