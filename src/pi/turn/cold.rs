//! A cold pi turn: a prepared turn on an agy of its own (one process per
//! turn), its events relayed to pi. The warm session falls back to
//! [`run_cold_prepared`] when its agy cannot take the turn.

use super::prepare::PreparedTurn;
use super::start::{Begun, StreamStart};
use crate::pi::mcp::relay::Control;
use crate::runner;
use std::io::Write;
use tokio_util::sync::CancellationToken;

/// A prepared turn on an agy of its own (one process per turn), with pi's
/// tools served for this turn only; `control` is pi's control lines.
pub(super) async fn run_cold<W: Write>(
    start: StreamStart,
    standby: Option<crate::process::standby::Standby>,
    control: tokio::sync::mpsc::Receiver<Control>,
    pi: &mut crate::pi::provider::stream::PiStream<W>,
    cancel: &CancellationToken,
) -> bool {
    let Some(Begun {
        req,
        prepared,
        prelude,
        mut mapper,
        held: _held,
    }) = super::start::begin_turn(start, pi, cancel).await
    else {
        return false;
    };
    let cold = ColdTurn {
        req: &req,
        prepared: &prepared,
        prelude,
    };
    run_cold_prepared(cold, &mut mapper, standby, control, pi, cancel).await
}

/// A turn past its prologue, to run on an agy of its own.
pub(super) struct ColdTurn<'a> {
    pub(super) req: &'a crate::pi::provider::StreamRequest,
    pub(super) prepared: &'a PreparedTurn,
    pub(super) prelude: runner::Prelude,
}

/// [`run_cold`] after [`turn_prologue`].
pub(super) async fn run_cold_prepared<W: Write>(
    cold: ColdTurn<'_>,
    mapper: &mut crate::pi::provider::mapper::EventMapper,
    standby: Option<crate::process::standby::Standby>,
    control: tokio::sync::mpsc::Receiver<Control>,
    pi: &mut crate::pi::provider::stream::PiStream<W>,
    cancel: &CancellationToken,
) -> bool {
    let ColdTurn {
        req,
        prepared,
        prelude,
    } = cold;
    let mut turn = prepared.turn.clone();
    let mut cfg = prepared.cfg.clone();
    let served = super::tools::offer_pi_tools(req, prepared, &prelude, &mut turn, mapper, pi).await;
    let bridge = match served {
        Ok(b) => b,
        Err(message) => {
            pi.fail(false, &message);
            return false;
        }
    };
    let mut bridge = bridge;
    let own_server = bridge.as_ref().map(|_| crate::pi::mcp::SERVER_NAME);
    let mut gate =
        super::tools::open_turn_gate(prepared, &mut cfg, &mut turn, own_server, pi, cancel).await;
    let window = prepared.settings.tool_batch;
    let mut side = super::tools::tool_side(bridge.as_mut(), gate.as_mut(), control, window);

    let (tx, mut rx) = runner::event_channel();
    // This binary as agy's guardian (`run_config`), already started.
    cfg.guardian = cfg.guardian.map(|guardian| match standby {
        Some(standby) => guardian.with_standby(standby),
        None => guardian,
    });
    let run_cancel = cancel.clone();
    let runner =
        tokio::spawn(async move { runner::run_with(&cfg, &turn, prelude, run_cancel, tx).await });
    crate::pi::mcp::relay::relay(&mut rx, side.as_mut().ok(), pi, mapper, cancel).await;
    let result = runner.await;
    // The turn is over: close the ports, remove the configs, answer any
    // call and any question.
    drop((side, bridge, gate));
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            pi.fail(
                false,
                &format!("agy-bridge failed while running the turn: {e}"),
            );
            return false;
        }
    };
    super::end::end_turn(pi, prepared, req, &result)
}
