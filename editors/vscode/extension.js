// Starts `kernelpolicy lsp` (stdio) for YAML files; the server itself ignores YAML that is no
// rule, policy or case file. Commands the server offers (a case's explain, an operator file's
// diff) run from its code lenses; their text goes to the "kernelpolicy" output channel.
"use strict";
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const config = vscode.workspace.getConfiguration("kernelpolicy");
  const [command, ...args] = config.get("server.command", ["kernelpolicy", "lsp"]);
  client = new LanguageClient(
    "kernelpolicy",
    "kernelpolicy",
    { command, args },
    {
      documentSelector: [{ scheme: "file", language: "yaml" }],
      initializationOptions: { policy: config.get("policy", []) },
      synchronize: { configurationSection: "kernelpolicy" },
    },
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
