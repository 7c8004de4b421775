"""The command palette provider: every binding of the current screen (and each view) as a command."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


class FoundryCommands(Provider):
    def _commands(self) -> list[tuple[str, str, object]]:
        screen = self.screen
        out = []
        seen = set()
        for key, active in screen.active_bindings.items():
            binding = active.binding
            if not binding.description or binding.action in seen:
                continue
            if binding.action.startswith(("app.command_palette", "command_palette")):
                continue
            seen.add(binding.action)
            allowed = active.node.check_action(binding.action.split("(")[0], ()) if hasattr(active.node, "check_action") else True
            if allowed is not True:  # hidden or disabled (read-only)
                continue
            title = f"{binding.description} ({binding.key_display or key})"
            out.append((title, f"{type(active.node).__name__}: {binding.action}",
                        partial(active.node.run_action, binding.action)))
        return out

    async def discover(self) -> Hits:
        for title, help_text, callback in self._commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
