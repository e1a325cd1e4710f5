//! Cancellation: SIGTERM or SIGINT to the supervisor ends the run early but still writes its
//! report. The handler only records the signal; the supervisor's wait loop sees it, kills the
//! jail, and the run ends as usual with the incomplete reason `cancelled`.

use std::sync::atomic::{AtomicI32, Ordering};

/// The first cancelling signal received (0: none).
static CANCELLED_BY: AtomicI32 = AtomicI32::new(0);

#[derive(Debug, thiserror::Error)]
pub enum CancelError {
    #[error("cannot install the {0} handler: {1}")]
    Install(&'static str, nix::Error),
}

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe. A second signal keeps the first one's name.
    let _ = CANCELLED_BY.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
}

/// Installs the handlers for SIGTERM and SIGINT (once, in the supervisor's `main`). `SA_RESTART`
/// keeps the supervisor's blocking calls going; the wait loop polls [`requested`].
pub fn install() -> Result<(), CancelError> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for (sig, name) in [(Signal::SIGTERM, "SIGTERM"), (Signal::SIGINT, "SIGINT")] {
        // SAFETY: the handler only does an atomic store.
        unsafe { sigaction(sig, &act) }.map_err(|e| CancelError::Install(name, e))?;
    }
    Ok(())
}

/// The signal that asked for cancellation, by name, if one arrived.
pub fn requested() -> Option<&'static str> {
    signal_name(CANCELLED_BY.load(Ordering::SeqCst))
}

fn signal_name(sig: i32) -> Option<&'static str> {
    match sig {
        0 => None,
        libc::SIGTERM => Some("SIGTERM"),
        libc::SIGINT => Some("SIGINT"),
        _ => Some("a signal"),
    }
}

/// The incomplete reason of a cancelled run (documented in `report-format.md`).
pub const REASON: &str = "cancelled";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_cancelling_signals() {
        assert_eq!(signal_name(0), None);
        assert_eq!(signal_name(libc::SIGTERM), Some("SIGTERM"));
        assert_eq!(signal_name(libc::SIGINT), Some("SIGINT"));
    }
}
