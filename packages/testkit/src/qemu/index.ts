export { HOST_LINK, QemuGuest, guestUnavailableReason } from './guest.js';
export type { BackgroundProcess, GuestInfo, GuestOptions, HostForward, InteractiveProcess } from './guest.js';
export { BOOT_MODULES, DEFAULT_GUEST_DIR, buildGuestImage, findGuestKernel, guestDir } from './image.js';
export type { GuestImage, GuestKernel } from './image.js';
export { hostHasIpvs, ipvsKernelUnavailableReason, openIpvsKernel } from './kernel.js';
export type { TestKernel } from './kernel.js';
