"""foundry-tui: a Textual dashboard over the same control plane as the `foundry` CLI.

Screens live in `screens/`, widgets grouped by area in `widgets/`, styles in `foundry.tcss`.
Nothing outside `foundry.app` imports textual.
"""
