//! Health checks (configuration.txt §5.2 `check`, `agent-check`, `track`; §4.2 `option
//! httpchk`, `option tcp-check`): a task per checked server that probes it every `inter`,
//! counts successes and failures with rise/fall hysteresis, and pushes every state change into
//! the server's backend, whose balancer then stops or starts sending it traffic.
//!
//! The checks run on their own thread with their own single-threaded tokio runtime
//! ([`start`]), so a slow or hanging check never delays the data path's event loops, and the
//! data path never waits for a check: the balancer only sees events. The pieces: [`status`]
//! (HAProxy's status codes and messages), [`machine`] (rise/fall, pure), [`expect`] (rule
//! matching, pure), [`reply`] (the ready-made checks' verdicts, pure), [`agent`] (the agent's words, pure), [`probe`] (the network side of one
//! check), [`report`] (transition messages) and [`engine`] (tasks, timing, state changes).

pub mod agent;
pub mod engine;
pub mod expect;
pub mod external;
pub mod machine;
pub mod mail;
pub mod probe;
pub mod reply;
pub mod report;
pub mod status;

pub use engine::start;
