/// Runs `work` on the main actor once the current turn of the daemon's event loop is over: after
/// every handler of the turn has run and written what it had to, before the loop waits again.
/// Work given during that run goes after what was given before it, in the same run.
///
/// A feed defers its look for upstream work with it (``Feed/advanceUpstreamAfterTurn()``), so
/// the answers of a turn leave before a fetch starts; the daemon gives the event loop's.
public typealias TurnEnd = @MainActor (_ work: @escaping @MainActor () -> Void) -> Void
