//! A Server-Sent Events parser (WHATWG HTML "event stream interpretation"): lines end in CRLF,
//! LF or CR (also when split between chunks), `:` starts a comment, one leading space after the
//! colon is dropped, several `data:` lines join with `\n`, a blank line dispatches, an event
//! without data is not dispatched. Chunks may split anywhere, even inside a UTF-8 character.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `message` when absent.
    pub event: String,
    pub data: String,
    /// The last `id:` seen (the Infinispan server sends none).
    pub id: Option<String>,
    /// A `retry:` field of this event, in milliseconds (the Infinispan server sends none).
    pub retry: Option<u64>,
}

/// Incremental parser: feed it chunks, get complete events. Bounded: an event (its data and
/// the line being read) larger than its limit is not kept; the parser says it overflowed
/// ([`SseParser::overflowed`]) and the connection must end.
#[derive(Debug)]
pub struct SseParser {
    /// The bound on one event, in bytes.
    limit: usize,
    /// An event exceeded `limit`: nothing more is parsed.
    overflowed: bool,
    line: Vec<u8>,
    /// The previous chunk ended in CR: a leading LF of the next chunk belongs to it.
    pending_cr: bool,
    started: bool,
    event: String,
    data: String,
    has_data: bool,
    last_id: Option<String>,
    retry: Option<u64>,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::with_limit(crate::config::DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that keeps events up to `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        Self {
            limit,
            overflowed: false,
            line: Vec::new(),
            pending_cr: false,
            started: false,
            event: String::new(),
            data: String::new(),
            has_data: false,
            last_id: None,
            retry: None,
        }
    }

    /// The bound on one event, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// An event exceeded the limit: what it had is dropped, and nothing more is parsed.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Feeds one chunk and returns the events it completed (none once overflowed).
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        if self.overflowed {
            return out;
        }
        if chunk.is_empty() {
            // An empty chunk says nothing about a CR that ended the previous one.
            return out;
        }
        let mut i = 0;
        if self.pending_cr && chunk.first() == Some(&b'\n') {
            i = 1;
        }
        self.pending_cr = false;
        while i < chunk.len() {
            match chunk[i] {
                b'\n' => {
                    self.end_line(&mut out);
                }
                b'\r' => {
                    self.end_line(&mut out);
                    if i + 1 < chunk.len() {
                        if chunk[i + 1] == b'\n' {
                            i += 1;
                        }
                    } else {
                        self.pending_cr = true;
                    }
                }
                b => {
                    if self.line.len() + self.data.len() >= self.limit {
                        self.overflow();
                        return out;
                    }
                    self.line.push(b);
                }
            }
            i += 1;
        }
        out
    }

    fn overflow(&mut self) {
        self.overflowed = true;
        self.line = Vec::new();
        self.data = String::new();
        self.event = String::new();
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let raw = std::mem::take(&mut self.line);
        let mut line = String::from_utf8_lossy(&raw).into_owned();
        if !self.started {
            self.started = true;
            if let Some(rest) = line.strip_prefix('\u{feff}') {
                line = rest.to_owned();
            }
        }
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        let retry = self.retry.take();
        if !self.has_data {
            return;
        }
        self.has_data = false;
        out.push(SseEvent {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data: std::mem::take(&mut self.data),
            id: self.last_id.clone(),
            retry,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_event_over_the_limit_overflows_the_parser() {
        let mut p = SseParser::with_limit(16);
        assert_eq!(p.feed(b"data: short\n\n"), vec![ev("message", "short")]);
        assert!(!p.overflowed());
        // Over several lines and chunks: the sum counts.
        assert!(p.feed(b"data: 0123456\n").is_empty());
        assert!(p.feed(b"data: 789abcdef\n\n").is_empty());
        assert!(p.overflowed());
        // Nothing more once overflowed.
        assert!(p.feed(b"data: x\n\n").is_empty());
        // One endless line, never a newline.
        let mut p = SseParser::with_limit(1024);
        for _ in 0..100 {
            p.feed(&[b'a'; 4096]);
        }
        assert!(p.overflowed());
    }

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        chunks.iter().flat_map(|c| p.feed(c)).collect()
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: None,
            retry: None,
        }
    }

    #[test]
    fn the_servers_yaml_frame() {
        let s = b"event: create-cache\ndata: infinispan: \ndata:   cacheContainer: \ndata: # a comment inside the data\n\nevent: remove-cache\ndata: c1\n\n";
        assert_eq!(
            parse_all(&[s]),
            vec![
                ev(
                    "create-cache",
                    "infinispan: \n  cacheContainer: \n# a comment inside the data"
                ),
                ev("remove-cache", "c1"),
            ]
        );
    }

    #[test]
    fn fields_comments_and_line_endings() {
        let s = b": keep-alive\r\nevent:x\r\ndata\r\ndata:  two spaces\rid: 7\nretry: 300\n\ndata: no event name\n\nevent: empty\n\n";
        let got = parse_all(&[s]);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].event, "x");
        assert_eq!(got[0].data, "\n two spaces");
        assert_eq!(got[0].id.as_deref(), Some("7"));
        assert_eq!(got[0].retry, Some(300));
        assert_eq!(
            got[1],
            SseEvent {
                id: Some("7".into()),
                ..ev("message", "no event name")
            }
        );
    }

    #[test]
    fn crlf_split_between_chunks_is_one_line_end() {
        let got = parse_all(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
        assert_eq!(got, vec![ev("message", "a\nb")]);
    }

    #[test]
    fn crlf_split_by_an_empty_chunk_is_still_one_line_end() {
        // Found by the chunk-split property: an empty chunk between CR and LF made the LF a
        // blank line, which dispatched early and dropped the pending `event:` name.
        let got = parse_all(&[b"event: a\r", b"", b"\ndata: x\r\n\r\n"]);
        assert_eq!(got, vec![ev("a", "x")]);
    }

    #[test]
    fn incomplete_event_is_not_dispatched() {
        assert!(parse_all(&[b"event: x\ndata: y\n"]).is_empty());
    }

    fn stream_text() -> impl Strategy<Value = (String, Vec<SseEvent>)> {
        let name = "[a-z-]{1,12}";
        let line = "[^\r\n]{0,20}";
        let eol = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
        let event = (
            name,
            proptest::collection::vec(line, 1..4),
            eol.clone(),
            any::<bool>(),
        );
        proptest::collection::vec(event, 0..6).prop_map(|events| {
            let mut text = String::new();
            let mut expected = Vec::new();
            for (name, lines, eol, comment) in events {
                if comment {
                    text.push_str(&format!(": comment{eol}"));
                }
                text.push_str(&format!("event: {name}{eol}"));
                for l in &lines {
                    text.push_str(&format!("data: {l}{eol}"));
                }
                text.push_str(eol);
                expected.push(SseEvent {
                    event: name,
                    data: lines.join("\n"),
                    id: None,
                    retry: None,
                });
            }
            (text, expected)
        })
    }

    proptest! {
        #[test]
        fn any_chunk_split_gives_the_same_events(
            (text, expected) in stream_text(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let bytes = text.as_bytes();
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut p = SseParser::new();
            let mut got = Vec::new();
            let mut start = 0;
            for pt in points.into_iter().chain(std::iter::once(bytes.len())) {
                got.extend(p.feed(&bytes[start..pt]));
                start = pt;
            }
            prop_assert_eq!(got, expected);
        }
    }
}
