import Daemon

MainActor.assumeIsolated {
    Feedd.main(Array(CommandLine.arguments.dropFirst()))
}
