//! A crash inside an engine (ONNX Runtime's optimizer, a GPU driver) is a signal, not a panic: no guard can catch
//! it, and the shell would only say "Segmentation fault". A handler for SIGSEGV, SIGBUS, SIGILL and SIGFPE prints
//! one error naming the stage, engine and node the process was in, and ends it with exit code 2 (files are only
//! written atomically, so nothing half-written is left). It writes from a fixed buffer with `write(2)` and ends
//! with `_exit`, what a signal handler may do; the stage is read only if its lock is free.

#[cfg(unix)]
use super::WHERE;

/// Installs the handler (Unix; elsewhere the operating system reports the crash).
pub fn catch() {
    #[cfg(unix)]
    for sig in [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE] {
        // SAFETY: a zeroed sigaction with an `extern "C"` handler of the SA_SIGINFO signature; runs before the
        // command starts its work.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_crash as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// A fixed buffer the message is assembled in (no allocation inside a signal handler).
struct Line {
    buf: [u8; 2048],
    len: usize,
}

impl Line {
    fn push(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }
}

/// What the crash was, in words.
fn what(sig: i32) -> &'static [u8] {
    #[cfg(unix)]
    match sig {
        libc::SIGSEGV => return b"a segmentation fault (SIGSEGV)",
        libc::SIGBUS => return b"a bus error (SIGBUS)",
        libc::SIGILL => return b"an illegal instruction (SIGILL)",
        _ => {}
    }
    let _ = sig;
    b"an arithmetic fault (SIGFPE)"
}

/// The message: the signal, then the stage, engine and node (`at`) when known.
fn message(sig: i32, at: Option<&[String; 3]>) -> Line {
    let mut l = Line {
        buf: [0; 2048],
        len: 0,
    };
    l.push(b"error: phantom crashed with ");
    l.push(what(sig));
    if let Some([stage, engine, node]) = at {
        let stage = if stage.is_empty() { "start-up" } else { stage };
        l.push(b" in stage \"");
        l.push(stage.as_bytes());
        l.push(b"\"");
        if !engine.is_empty() {
            l.push(b", in ");
            l.push(engine.as_bytes());
        }
        if !node.is_empty() {
            l.push(b", at node `");
            l.push(node.as_bytes());
            l.push(b"`");
        }
    }
    l.push(hint(sig));
    l
}

/// What to do next. A bus error is a read from a memory-mapped file whose bytes are not there: seen when ONNX
/// Runtime's CUDA provider library had been unpacked from a cut-off archive.
fn hint(sig: i32) -> &'static [u8] {
    #[cfg(unix)]
    if sig == libc::SIGBUS {
        return b"\n  hint: a bus error is a read from a file mapped into memory whose bytes are missing: a library \
or data file that is cut short or was replaced while phantom ran. Check that ONNX Runtime's libraries (`phantom \
runtimes` names them) and the model's external-data files are whole, and that /dev/shm is not full\n";
    }
    let _ = sig;
    b"\n  hint: the engine running there crashed, which says nothing about the model's numbers; with ONNX \
Runtime, another --ort-opt-level often avoids an optimizer's crash (ORT 1.31.1 crashes at `all` on some fp16 \
models). Please report it to that engine with the model\n"
}

#[cfg(unix)]
extern "C" fn on_crash(sig: libc::c_int, _info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let at = WHERE.try_lock();
    let l = message(sig, at.as_deref().ok());
    // SAFETY: write(2) and _exit(2) are async-signal-safe; the buffer lives on this handler's stack.
    unsafe {
        libc::write(2, l.buf.as_ptr().cast(), l.len);
        libc::_exit(2);
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_signal_stage_engine_and_node() {
        let at = [
            "target: ort-cpu".into(),
            "ONNX Runtime".into(),
            "conv1".into(),
        ];
        let text = |l: Line| String::from_utf8_lossy(&l.buf[..l.len]).to_string();
        let full = text(message(libc::SIGSEGV, Some(&at)));
        assert!(
            full.starts_with(
                "error: phantom crashed with a segmentation fault (SIGSEGV) in stage \"target: ort-cpu\", in \
                 ONNX Runtime, at node `conv1`\n  hint:"
            ),
            "{full}"
        );
        assert!(full.contains("another --ort-opt-level"), "{full}");
        let bare = text(message(libc::SIGBUS, None));
        assert!(
            bare.starts_with("error: phantom crashed with a bus error (SIGBUS)\n"),
            "{bare}"
        );
        assert!(bare.contains("cut short"), "{bare}");
        assert!(!bare.contains("--ort-opt-level"), "{bare}");
    }
}
