"""The `jaxbench` command, composed on the top floor: every package's subcommands, the launchers of every
package, and the store as the place a run's results go. Nothing below imports this package.

    jaxbench --help
"""
