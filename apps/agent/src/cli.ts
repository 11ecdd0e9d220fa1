#!/usr/bin/env node
import { kubeEnvironment } from './kube-environment.js';
import { runCli } from './run-cli.js';

const exitCode = await runCli(process.argv.slice(2), { environment: kubeEnvironment });
// Exit explicitly: a controller left behind by a stop timeout may still hold handles.
process.exit(exitCode);
