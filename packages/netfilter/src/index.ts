export { CommandError, FailFastSession, formatCommandLine } from './command.js';
export type { CommandErrorDetails, CommandResult, CommandRunner, CommandSpec } from './command.js';
export { CommandRegistry, DEFAULT_COMMAND_TIMEOUT_MS, ExecRunner, runningCommands } from './exec-runner.js';
export type { ExecRunnerOptions } from './exec-runner.js';
export { RecordingRunner } from './recording-runner.js';
export { DryRunRunner, isReadCommand } from './dry-run-runner.js';
export type { DryRunRunnerOptions } from './dry-run-runner.js';
export type {
  InvocationMatcher,
  RecordedInvocation,
  RecordingRunnerOptions,
  ScriptedResponse,
  ScriptedResult,
} from './recording-runner.js';
export { Mutex, nftTableLock, toolLocks } from './mutex.js';
export type { ToolFamily } from './mutex.js';
export { findExecutable, hasTool } from './executables.js';
export { inetFamily, kernelHasFamily } from './family.js';
export type { IpFamily } from './family.js';

export { Iptables, iptablesBinary } from './iptables.js';
export type { IptablesBackend, IptablesOptions, IptablesTool, IptablesVersion } from './iptables.js';
export { MAX_CHAIN_NAME_LENGTH, assertOwnChainName, renderIptablesRestore } from './iptables-restore.js';
export type { RestoreChain, RestoreTable } from './iptables-restore.js';
export { parseIptablesSave, selectOwnChains } from './iptables-save.js';
export type { OwnChains, SavedChain, SavedRule, SavedTable } from './iptables-save.js';

export { Ipset } from './ipset.js';
export type { IpsetOptions } from './ipset.js';
export { IpsetScript, MAX_IPSET_NAME_LENGTH, assertSetName, ipsetNetElements } from './ipset-script.js';
export type { IpsetMember, IpsetSpec, IpsetType } from './ipset-script.js';
export { parseIpsetNames, parseIpsetSave } from './ipset-save.js';
export type { SavedIpset } from './ipset-save.js';

export { Nft, isNftRefusal } from './nft.js';
export type { NftOptions } from './nft.js';
export { parseNftJson } from './nft-json.js';
export type { NftChain, NftCounter, NftMap, NftRule, NftRuleset, NftSet, NftTable } from './nft-json.js';

export { IpRoute2 } from './ip.js';
export type {
  IpAddressInfo,
  IpBatchFailure,
  IpLink,
  IpLinkAddresses,
  IpRoute,
  IpRouteQuery,
  IpRoute2Options,
} from './ip.js';
export { addNetns, deleteNetns, killNetnsProcesses, listNetns, netnsPids } from './netns.js';
export { blamedInputLine } from './blamed-line.js';
export { conntrackDeleteArgs, deleteConntrackEntries, listConntrackEntries, parseConntrackList } from './conntrack.js';
export type { ConntrackDeleteResult, ConntrackEntry, ConntrackFilter, ConntrackOptions, ConntrackProtocol, ConntrackTuple } from './conntrack.js';

export { Ipvsadm, ipvsLock } from './ipvs.js';
export type { IpvsadmOptions, IpvsRestoreResult, IpvsTimeouts } from './ipvs.js';
export {
  canonicalIpvsAddress,
  ipvsAddressFamily,
  ipvsDestinationId,
  ipvsRestoreLine,
  ipvsServiceId,
  ipvsServiceOptionsEqual,
  parseIpvsConnectionTable,
  parseIpvsConnections,
  parseIpvsSave,
  parseIpvsStats,
} from './ipvs-rules.js';
export type {
  IpvsConnectionEntry,
  IpvsDestination,
  IpvsDestinationConnections,
  IpvsForwarding,
  IpvsProtocol,
  IpvsService,
  IpvsServiceKey,
  IpvsServiceStats,
  IpvsVirtualServer,
} from './ipvs-rules.js';
export { LINKTYPE_NFLOG, NflogDecodeError, PcapNflogDecoder, decodeIpPacket, decodeNflogRecord, killLeftoverNflogReaders, startNflogReader } from './nflog.js';
export type { NflogChunk, NflogPacket, NflogReader, NflogReaderEnd, NflogReaderOptions } from './nflog.js';
export { killLeftoverProcesses } from './leftovers.js';
export type { LeftoverProcessQuery } from './leftovers.js';
