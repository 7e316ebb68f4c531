//! The words of a pod's status made fit for a condition (pure): a pull error without the
//! back-off's and gRPC's wrapping, a log's last lines without stack frames or secrets, clipped.

/// Waiting reasons of a container whose image cannot be pulled.
pub(super) const PULL_REASONS: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "RegistryUnavailable",
    "SignatureValidationFailed",
];

/// The longest part of a termination message a condition carries.
const SUMMARY_MAX: usize = 1200;
/// The most log lines of a termination message a condition carries.
const SUMMARY_LINES: usize = 8;
/// The longest log line a condition carries.
const LINE_MAX: usize = 400;
/// How much of a log the kubelet keeps as a termination message
/// (`FallbackToLogsOnError`: the last 2048 bytes, at most 80 lines).
const LOG_TAIL_BYTES: usize = 2048;

/// The kubelet's message of a pull error without the back-off's wrapping, so that
/// `ErrImagePull` and `ImagePullBackOff` read the same.
pub(super) fn pull_detail(reason: &str, message: &str) -> String {
    let mut detail = message.trim();
    if let Some(rest) = detail.strip_prefix("Back-off pulling image ") {
        // `"IMAGE": ErrImagePull: DETAIL`, or just `"IMAGE"` on older kubelets.
        detail = match rest.find("\": ") {
            Some(end) => &rest[end + 3..],
            None => "",
        };
    }
    for prefix in PULL_REASONS {
        if let Some(rest) = detail
            .strip_prefix(prefix)
            .and_then(|r| r.strip_prefix(": "))
        {
            detail = rest;
        }
    }
    let detail = without_rpc_wrapping(detail);
    if detail.is_empty() {
        reason.to_string()
    } else {
        detail.to_string()
    }
}

/// A container runtime's message without its gRPC wrapping (`rpc error: code = NotFound desc =
/// `), which says nothing to a user.
pub(super) fn without_rpc_wrapping(message: &str) -> &str {
    match message.strip_prefix("rpc error: code = ") {
        Some(rest) => rest.find(" desc = ").map_or(message, |i| &rest[i + 8..]),
        None => message,
    }
}

/// The end of a termination message (a log's last lines) in a few lines joined by ` | `: stack
/// frames dropped, each line and the whole clipped, what looks like a secret masked.
pub fn log_summary(message: &str) -> String {
    // The kubelet keeps the last 2048 bytes of a log: the first line of that much is cut.
    let skip = usize::from(message.len() >= LOG_TAIL_BYTES && message.trim_end().contains('\n'));
    let lines: Vec<String> = message
        .lines()
        .skip(skip)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !is_stack_frame(l))
        .map(|l| clip(&mask_secrets(l), LINE_MAX))
        .collect();
    let mut kept: Vec<&str> = Vec::new();
    let mut length = 0;
    for line in lines.iter().rev().take(SUMMARY_LINES) {
        if length + line.len() > SUMMARY_MAX && !kept.is_empty() {
            break;
        }
        length += line.len() + 3;
        kept.push(line);
    }
    kept.reverse();
    kept.join(" | ")
}

fn is_stack_frame(line: &str) -> bool {
    line.starts_with("at ")
        || (line.starts_with("... ")
            && (line.ends_with(" more") || line.ends_with(" common frames omitted")))
}

/// Words after which a value is a secret.
const SECRET_WORDS: [&str; 6] = [
    "password",
    "passwd",
    "secret",
    "token",
    "credential",
    "apikey",
];

/// `line` with the value after `password=`, `secret: `, `token="..."` (any case) replaced by
/// `***`.
fn mask_secrets(line: &str) -> String {
    let lower = line.to_ascii_lowercase();
    let mut out = String::with_capacity(line.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some((start, word)) = SECRET_WORDS
        .iter()
        .filter_map(|w| lower[from..].find(w).map(|i| (from + i, *w)))
        .min_by_key(|(i, _)| *i)
    {
        // The rest of the word (`passwords`, `secret_key`, `tokenValue`), then `=` or `:`.
        let mut i = start + word.len();
        let bytes = line.as_bytes();
        while i < bytes.len()
            && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'-')
        {
            i += 1;
        }
        let mut j = i;
        while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'"' || bytes[j] == b'\'') {
            j += 1;
        }
        if j < bytes.len() && (bytes[j] == b'=' || bytes[j] == b':') {
            j += 1;
            while j < bytes.len() && bytes[j] == b' ' {
                j += 1;
            }
            let quote = bytes.get(j).copied().filter(|b| *b == b'"' || *b == b'\'');
            if quote.is_some() {
                j += 1;
            }
            let mut end = j;
            while end < bytes.len() {
                let b = bytes[end];
                let stop = match quote {
                    Some(q) => b == q,
                    None => b == b' ' || b == b',' || b == b';' || b == b'&' || b == b'>',
                };
                if stop {
                    break;
                }
                end += 1;
            }
            if end > j {
                out.push_str(&line[copied..j]);
                out.push_str("***");
                copied = end;
            }
            from = end.max(i);
        } else {
            from = i;
        }
    }
    out.push_str(&line[copied..]);
    out
}

/// At most `max` bytes of `text` (on a character boundary), with `…` when cut.
pub(super) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_summaries_keep_the_last_lines_without_frames_or_secrets() {
        let log = "one\ntwo\n\tat a.b(C.java:1)\nthree\n\n... 3 more\n";
        assert_eq!(log_summary(log), "one | two | three");
        let many: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        assert_eq!(
            log_summary(&many),
            "line 13 | line 14 | line 15 | line 16 | line 17 | line 18 | line 19 | line 20"
        );
        let long = format!("{}\n", "x".repeat(5000));
        let summary = log_summary(&long);
        assert!(
            summary.len() <= LINE_MAX + 3 && summary.ends_with('…'),
            "{summary}"
        );
        let wide: String = (0..8)
            .map(|i| format!("{i}{}\n", "y".repeat(390)))
            .collect();
        let summary = log_summary(&wide);
        assert!(summary.len() <= SUMMARY_MAX + 10, "{}", summary.len());
        assert!(
            summary.starts_with('5') || summary.starts_with('6'),
            "{summary}"
        );
        assert_eq!(log_summary(""), "");
        // A log tail of the kubelet's 2048 bytes starts inside a line: that line is left out.
        let tail = format!("{}\nERROR the cause\nstopped\n", "z".repeat(2048));
        assert_eq!(log_summary(&tail), "ERROR the cause | stopped");
    }

    #[test]
    fn secrets_are_masked() {
        for (line, expected) in [
            ("password=hunter2 next", "password=*** next"),
            ("PASSWORD: hunter2", "PASSWORD: ***"),
            (
                "<keystore path=\"/k.p12\" password=\"hunter2\" alias=\"s\"/>",
                "<keystore path=\"/k.p12\" password=\"***\" alias=\"s\"/>",
            ),
            ("secret_key='abc def' x", "secret_key='***' x"),
            ("token=abc;user=bob", "token=***;user=bob"),
            ("a password is needed", "a password is needed"),
            ("credentials:", "credentials:"),
            ("no word here", "no word here"),
            ("Passwords: a, b", "Passwords: ***, b"),
        ] {
            assert_eq!(mask_secrets(line), expected, "{line}");
        }
        assert!(!log_summary("ERROR login failed for password=hunter2").contains("hunter2"));
    }

    #[test]
    fn clip_cuts_on_a_character_boundary() {
        assert_eq!(clip("abc", 5), "abc");
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(clip("ééé", 3), "é…");
    }
}
