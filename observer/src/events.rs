//! `--events FILE|-`: a live copy of the trace while the run goes. The trace writer's output is
//! teed here byte for byte (header line, then events), so the stream is a trace in the format of
//! `docs/trace-format.md`: `observe replay` reads it. It is flushed whenever the supervisor is
//! idle, so a consumer sees an event within moments of it happening, not at the end of the run.
//!
//! The trace file stays the record the report is judged from; a consumer that goes away (a
//! closed pipe) stops the stream with a warning, never the run.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    #[error("--events {path}: {source}")]
    Open { path: String, source: io::Error },
}

/// True when `--events` names standard output.
pub fn is_stdout(target: &Path) -> bool {
    target == Path::new("-")
}

/// Opens the live target: standard output for `-`, else the file (created or truncated).
pub fn open_target(target: &Path) -> Result<Box<dyn Write + Send>, EventsError> {
    if is_stdout(target) {
        return Ok(Box::new(io::stdout()));
    }
    File::create(target)
        .map(|f| Box::new(f) as Box<dyn Write + Send>)
        .map_err(|source| EventsError::Open {
            path: target.display().to_string(),
            source,
        })
}

/// The trace file, and optionally a live copy of every byte written to it.
pub struct Tee {
    file: File,
    live: Option<Box<dyn Write + Send>>,
}

impl Tee {
    pub fn new(file: File, live: Option<Box<dyn Write + Send>>) -> Tee {
        Tee { file, live }
    }

    fn live_op(&mut self, op: impl FnOnce(&mut dyn Write) -> io::Result<()>) {
        if let Some(l) = self.live.as_mut() {
            if let Err(e) = op(l.as_mut()) {
                tracing::warn!("--events stream stopped: {e}");
                self.live = None;
            }
        }
    }
}

impl Write for Tee {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.live_op(|l| l.write_all(&buf[..n]));
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()?;
        self.live_op(|l| l.flush());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Trace, TraceHeader, TraceWriter};
    use std::io::BufWriter;
    use std::sync::{Arc, Mutex};

    /// A live target the test can read while the writer still holds it.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Shared {
        /// Complete lines received so far.
        fn lines(&self) -> usize {
            self.0
                .lock()
                .unwrap()
                .iter()
                .filter(|b| **b == b'\n')
                .count()
        }
    }
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Fails every write, as a closed pipe does.
    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
    }

    fn header() -> TraceHeader {
        TraceHeader::new(
            "r1",
            "linux",
            Some("demo".into()),
            "2026-01-01T00:00:00Z".into(),
        )
    }

    #[test]
    fn the_stream_is_the_trace_and_arrives_on_flush() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let live = Shared::default();
        let tee = Tee::new(File::create(&path).unwrap(), Some(Box::new(live.clone())));
        let mut w = TraceWriter::new(BufWriter::with_capacity(1 << 16, tee), &header()).unwrap();
        let line = r#"{"seq":0,"t_ns":5,"pid":7,"kind":"output","data":"hi"}"#;
        w.write_raw(line).unwrap();
        // buffered until the supervisor's idle flush: nothing of the event yet, then all of it
        assert_eq!(live.lines(), 1);
        w.flush().unwrap();
        assert_eq!(live.lines(), 2);
        drop(w);
        let streamed = live.0.lock().unwrap().clone();
        assert_eq!(streamed, std::fs::read(&path).unwrap());
        let t = Trace::read(&streamed[..]).unwrap();
        assert_eq!(t.events.len(), 1);
        assert_eq!(t.events[0].seq, 1);
    }

    #[test]
    fn a_closed_consumer_stops_the_stream_not_the_trace() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let tee = Tee::new(File::create(&path).unwrap(), Some(Box::new(Closed)));
        let mut w = TraceWriter::new(BufWriter::new(tee), &header()).unwrap();
        for _ in 0..3 {
            w.write_raw(r#"{"seq":0,"t_ns":5,"pid":7,"kind":"output","data":"x"}"#)
                .unwrap();
            w.flush().unwrap();
        }
        drop(w);
        let t = Trace::read_file(&path).unwrap();
        assert_eq!(t.events.len(), 3);
    }

    #[test]
    fn an_unwritable_target_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("no/such/dir/events.jsonl");
        let e = open_target(&bad).err().expect("must fail").to_string();
        assert!(e.contains("--events") && e.contains("no/such/dir"), "{e}");
        assert!(is_stdout(Path::new("-")) && !is_stdout(Path::new("./-")));
    }
}
