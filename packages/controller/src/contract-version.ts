/**
 * The version of the plugin contract this host offers (the Controller, ControllerPlugin, PluginContext and SyncContext
 * types and createSyncController's behaviour): a plugin's `host` range is checked against it. It is not the package's
 * version, which moves with every release: it changes by hand, and only when the contract does (a minor for an
 * addition a plugin may ignore, a major for a change that breaks plugins written against the old one).
 */
export const PLUGIN_CONTRACT_VERSION = '1.0.0';
