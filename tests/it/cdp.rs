//! A minimal Chrome DevTools Protocol client over `--remote-debugging-pipe` (fd 3: commands in, fd 4: replies out,
//! NUL-terminated JSON), enough to drive one page in headless Chromium: open a URL, set a file input, evaluate.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

pub(crate) struct Browser {
    child: std::process::Child,
    commands: std::io::PipeWriter,
    replies: BufReader<std::io::PipeReader>,
    next: u64,
    session: String,
    /// Uncaught exceptions and `console.error` calls seen so far.
    pub(crate) errors: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts headless Chromium with one page open at `url`.
    pub(crate) fn open(chrome: &std::path::Path, url: &str) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (their_in, commands) = std::io::pipe().unwrap();
        let (replies, their_out) = std::io::pipe().unwrap();
        let (fd_in, fd_out) = (their_in.as_raw_fd(), their_out.as_raw_fd());
        let mut cmd = std::process::Command::new(chrome);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-sync",
            "--remote-debugging-pipe",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
        // SAFETY: only async-signal-safe calls (fcntl, dup2, close) between fork and exec. Both ends are first
        // moved above fd 9 so that placing one at 3 cannot overwrite the other.
        unsafe {
            cmd.pre_exec(move || {
                let a = libc::fcntl(fd_in, libc::F_DUPFD, 10);
                let b = libc::fcntl(fd_out, libc::F_DUPFD, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::close(a);
                libc::close(b);
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start chromium");
        drop((their_in, their_out));
        let mut browser = Browser {
            child,
            commands,
            replies: BufReader::new(replies),
            next: 0,
            session: String::new(),
            errors: Vec::new(),
            _profile: profile,
        };
        let target = browser.call("Target.createTarget", json!({ "url": "about:blank" }));
        let id = target["targetId"].as_str().unwrap().to_string();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({ "targetId": id, "flatten": true }),
        );
        browser.session = attached["sessionId"].as_str().unwrap().to_string();
        browser.call("Runtime.enable", json!({}));
        browser.call("Page.navigate", json!({ "url": url }));
        browser
    }

    /// Sends one command (to the page once attached) and returns its result; events are skipped, except errors,
    /// which are kept in `errors`.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let mut msg = json!({ "id": self.next, "method": method, "params": params });
        if !self.session.is_empty() {
            msg["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).unwrap();
        loop {
            let mut buf = Vec::new();
            let n = self.replies.read_until(0, &mut buf).unwrap();
            assert!(n > 0, "chromium closed the DevTools pipe during {method}");
            buf.pop();
            let reply: Value = serde_json::from_slice(&buf).unwrap();
            let method_of = reply["method"].as_str().unwrap_or("");
            if method_of == "Runtime.exceptionThrown"
                || (method_of == "Runtime.consoleAPICalled" && reply["params"]["type"] == "error")
            {
                self.errors.push(reply["params"].clone());
            }
            if reply["id"] == json!(self.next) {
                assert!(reply.get("error").is_none(), "{method}: {reply}");
                return reply["result"].clone();
            }
        }
    }

    /// Evaluates a JavaScript expression in the page and returns its value.
    pub(crate) fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        );
        r["result"]["value"].clone()
    }

    /// Polls `expression` until it is truthy; panics with `what` after `timeout`.
    pub(crate) fn wait_for(&mut self, expression: &str, timeout: Duration, what: &str) -> Value {
        let start = Instant::now();
        loop {
            let v = self.eval(expression);
            if !(v.is_null() || v == json!(false) || v == json!("")) {
                return v;
            }
            assert!(start.elapsed() < timeout, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sets the files of the `<input type=file>` matched by `selector`, as a person picking them would.
    pub(crate) fn set_files<P: AsRef<std::path::Path>>(&mut self, selector: &str, files: &[P]) {
        let root = self.call("DOM.getDocument", json!({}))["root"]["nodeId"].clone();
        let node = self.call(
            "DOM.querySelector",
            json!({ "nodeId": root, "selector": selector }),
        )["nodeId"]
            .clone();
        let files: Vec<String> = files
            .iter()
            .map(|f| f.as_ref().display().to_string())
            .collect();
        self.call(
            "DOM.setFileInputFiles",
            json!({ "nodeId": node, "files": files }),
        );
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
