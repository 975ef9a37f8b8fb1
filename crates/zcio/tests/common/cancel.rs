//! Peers killed while a task awaits: the shared shape of the async
//! suites' kill tests.

use std::future::Future;
use std::time::Duration;

use super::STEP;

/// Run `fut` while `kill` runs `after` from now; `fut` must end within
/// [`STEP`] (else the test fails, naming `what`). Returns its output.
pub async fn ends_after_kill<F: Future>(
    what: &str,
    after: Duration,
    kill: impl FnOnce(),
    fut: F,
) -> F::Output {
    let killer = async {
        tokio::time::sleep(after).await;
        kill();
        std::future::pending::<()>().await
    };
    let raced = async {
        tokio::select! {
            r = fut => r,
            _ = killer => unreachable!("the killer never ends"),
        }
    };
    tokio::time::timeout(STEP, raced)
        .await
        .unwrap_or_else(|_| panic!("{what}: no result within {STEP:?}"))
}
