//! The process's heap: the C allocator, with mid-size blocks mapped apart and cached per
//! event-loop thread, as HAProxy allocates its per-request objects from per-thread pools.
//!
//! A block of 3 to 16 KiB (a request's handling state, just under 8 KiB; an input buffer,
//! 16 KiB) is a mapping of its own, of whole pages ([`MappedClass`]), never carved from the C
//! allocator's heap: a burst of such short-lived blocks would otherwise leave, once freed,
//! holes among the small blocks that live as long as their connections (tasks, registrations,
//! relays), which the heap can neither fill with them nor give back. 9,000 WebSocket
//! connections upgraded in one burst held 36 to 41 MiB; with the request states mapped apart,
//! 28.8 MiB in every run. A mapping made and unmapped per request would cost two system calls
//! and its page faults, so a thread that asked for it ([`cache_this_thread`], the event loops)
//! keeps the blocks it frees, per class, and hands them out again: taking and giving back a
//! request's state is then a pop and a push on a list threaded through the free blocks. As
//! the input buffer pool does, the thread's upkeep ([`trim_thread_cache`]) unmaps the blocks
//! that stayed unused for a whole period, so a burst leaves no resident high-water mark. When
//! the system refuses a mapping (`vm.max_map_count` reached), the block comes from the C
//! allocator instead ([`Fallback`]), as glibc's own mappings fall back to its heap.
//!
//! Small blocks aligned beyond the C allocator's 16 bytes ([`AlignedClass`]: tokio's task
//! cells, 512 bytes on a 128-byte boundary, one per connection) are cached the same way.
//! glibc serves them through `posix_memalign`, which its per-thread cache does not cover
//! (before glibc 2.38): each takes the slow path, carving and splitting a larger chunk, and
//! each free merges chunks back, for every connection of a `Connection: close` load.
//!
//! It also holds the C allocator's settings and its trim ([`map_buffers_apart`] for larger
//! buffers, [`release_free_memory`]). This is the second crate allowed to use `unsafe`,
//! after `sluice_net::fd`: a global allocator is an `unsafe` trait, the free lists live inside
//! the blocks, and mappings and allocator settings are C calls; each block says why it holds.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ptr;

/// The page size the mapped classes are made of (4 KiB on every platform Sluice builds for;
/// the kernel rounds a mapping up to its own page size anyway).
const PAGE: usize = 4096;
/// Blocks up to this size stay in the C allocator's heap: small blocks are what it does
/// well (its per-thread cache covers up to about 1 KiB), and a page each would waste memory.
const LARGEST_IN_HEAP: usize = 3 * 1024;
/// Largest mapped block: one input buffer at `tune.bufsize`'s default.
const LARGEST_MAPPED: usize = 16 * 1024;
/// Mapped classes: 1 to 4 pages.
const CLASSES: usize = LARGEST_MAPPED / PAGE;
/// The largest alignment a mapped class serves: half a page, so that a block the C allocator
/// serves when the system refuses a mapping ([`Fallback`]) is never page-aligned, which is
/// how it is told apart from a mapping when freed.
const LARGEST_ALIGN: usize = PAGE / 2;
/// The most bytes of one class a thread keeps free; beyond, a freed block is unmapped. What
/// the traffic leaves unused for a whole trim period is unmapped anyway: this bounds only
/// the burst between two trims. It must cover what one turn of the event loop frees before
/// the next takes it again: a loop turn of 200 events (`tune.maxpollevents 200`, HAProxy's
/// default) over 2,000 kept-alive connections frees about 200 requests' states and buffers
/// at once, and a cache of 1 MiB a class unmapped, then mapped again, one and a half blocks
/// per request (proxy CPU per request up by 75%).
const CLASS_CACHE_BYTES: usize = 16 << 20;
/// Aligned classes: blocks of whole units, each aligned to one unit, for layouts aligned to
/// more than 16 bytes and up to one unit.
const ALIGNED_UNIT: usize = 128;
/// The largest block of an aligned class.
const LARGEST_ALIGNED: usize = 1024;
/// Aligned classes: 1 to 8 units.
const ALIGNED_CLASSES: usize = LARGEST_ALIGNED / ALIGNED_UNIT;
/// The most bytes of one aligned class a thread keeps free; beyond, a freed block goes back
/// to the C allocator. As for the mapped classes, the trim releases what stays unused.
const ALIGNED_CACHE_BYTES: usize = 4 << 20;

/// The allocator to declare with `#[global_allocator]`.
pub struct ThreadCachedAlloc;

/// A mapped class: blocks of `pages` whole pages, for the layouts [`MappedClass::of`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MappedClass {
    pages: usize,
}

impl MappedClass {
    /// The class of a block of `layout`; `None` for a block the C allocator serves.
    fn of(layout: Layout) -> Option<MappedClass> {
        let size = layout.size();
        if layout.align() > LARGEST_ALIGN || size <= LARGEST_IN_HEAP || size > LARGEST_MAPPED {
            return None;
        }
        Some(MappedClass {
            pages: size.div_ceil(PAGE),
        })
    }

    fn bytes(self) -> usize {
        self.pages * PAGE
    }

    fn index(self) -> usize {
        self.pages - 1
    }

    /// How many free blocks of this class a thread keeps at most.
    fn cache_limit(self) -> usize {
        CLASS_CACHE_BYTES / self.bytes()
    }

    /// A new mapping for a block of this class, zeroed; null if the system refuses.
    fn map(self) -> *mut u8 {
        #[cfg(test)]
        if tests::REFUSE_MAPPINGS.get() {
            return ptr::null_mut();
        }
        // SAFETY: an anonymous private mapping at an address of the kernel's choice touches
        // no memory of ours.
        let block = unsafe {
            libc::mmap(
                ptr::null_mut(),
                self.bytes(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if block == libc::MAP_FAILED {
            ptr::null_mut()
        } else {
            block.cast()
        }
    }

    /// Unmaps `block`, a block of this class that nothing uses any more.
    ///
    /// # Safety
    /// `block` comes from [`MappedClass::map`] for this class and is not used after.
    unsafe fn unmap(self, block: *mut u8) {
        // SAFETY: the caller's guarantee: the whole mapping is ours and dead.
        unsafe { libc::munmap(block.cast(), self.bytes()) };
    }
}

/// An aligned class: blocks of `units` whole [`ALIGNED_UNIT`]s from the C allocator, each
/// aligned to a unit, for the layouts [`AlignedClass::of`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AlignedClass {
    units: usize,
}

impl AlignedClass {
    /// The class of a block of `layout`; `None` for a block of another kind.
    fn of(layout: Layout) -> Option<AlignedClass> {
        let align = layout.align();
        if align <= 16 || align > ALIGNED_UNIT || layout.size() > LARGEST_ALIGNED {
            return None;
        }
        Some(AlignedClass {
            units: layout.size().div_ceil(ALIGNED_UNIT).max(1),
        })
    }

    /// The layout every block of the class is made and freed with.
    fn layout(self) -> Layout {
        // SAFETY: a power-of-two alignment and a size of at most a kilobyte.
        unsafe { Layout::from_size_align_unchecked(self.units * ALIGNED_UNIT, ALIGNED_UNIT) }
    }

    fn index(self) -> usize {
        self.units - 1
    }

    /// How many free blocks of this class a thread keeps at most.
    fn cache_limit(self) -> usize {
        ALIGNED_CACHE_BYTES / self.layout().size()
    }
}

/// One thread's free blocks of one class: a list threaded through their first word.
struct FreeList {
    head: Cell<*mut u8>,
    len: Cell<usize>,
    /// The shortest the list was since the last trim: that many blocks went unused.
    shortest: Cell<usize>,
}

/// One thread's cache: a free list per class.
struct Cache {
    enabled: Cell<bool>,
    lists: [FreeList; CLASSES],
    aligned: [FreeList; ALIGNED_CLASSES],
}

impl FreeList {
    const fn empty() -> FreeList {
        FreeList {
            head: Cell::new(ptr::null_mut()),
            len: Cell::new(0),
            shortest: Cell::new(0),
        }
    }
}

thread_local! {
    // Constant-initialised and without `Drop`: reaching it never allocates and never fails,
    // even while the thread ends, as an allocator needs.
    static CACHE: Cache = const {
        Cache {
            enabled: Cell::new(false),
            lists: [const { FreeList::empty() }; CLASSES],
            aligned: [const { FreeList::empty() }; ALIGNED_CLASSES],
        }
    };
}

/// Lets the calling thread keep the mapped and aligned blocks it frees, for threads that live
/// as long as the process (the event loops), and that call [`trim_thread_cache`]
/// periodically.
pub fn cache_this_thread() {
    CACHE.with(|cache| cache.enabled.set(true));
}

/// Runs `free` with the calling thread's cache off: the blocks it frees go back to the
/// system (or the C allocator) at once. For memory a cache of its own already found unused
/// for a whole period (the input buffer pool's trim): kept here, it would wait for two more
/// trims before leaving.
pub fn freeing_at_once<R>(free: impl FnOnce() -> R) -> R {
    let was = CACHE.with(|cache| cache.enabled.replace(false));
    let result = free();
    CACHE.with(|cache| cache.enabled.set(was));
    result
}

/// Frees the calling thread's cached blocks that stayed unused since the last call
/// (mappings to the system, aligned blocks to the C allocator); returns how many bytes.
pub fn trim_thread_cache() -> usize {
    CACHE.with(|cache| {
        let mut released = 0;
        for (index, list) in cache.lists.iter().enumerate() {
            let class = MappedClass { pages: index + 1 };
            list.free_unused(|block| {
                // SAFETY: a cached block is a free mapping of its class, owned by the list
                // until popped.
                unsafe { class.unmap(block) };
                released += class.bytes();
            });
        }
        for (index, list) in cache.aligned.iter().enumerate() {
            let class = AlignedClass { units: index + 1 };
            list.free_unused(|block| {
                // SAFETY: a cached block of an aligned class was made with its layout and is
                // owned by the list until popped.
                unsafe { System.dealloc(block, class.layout()) };
                released += class.layout().size();
            });
        }
        released
    })
}

impl FreeList {
    fn pop(&self) -> Option<*mut u8> {
        let head = self.head.get();
        if head.is_null() {
            return None;
        }
        // SAFETY: a block on the list is a free block owned by the list, aligned to at least
        // 128 bytes and at least that long; its first word holds the next block (or null).
        let next = unsafe { head.cast::<*mut u8>().read() };
        self.head.set(next);
        self.len.set(self.len.get() - 1);
        self.shortest.set(self.shortest.get().min(self.len.get()));
        Some(head)
    }

    /// Keeps `block` unless the list holds `limit` blocks; says whether it did.
    fn push(&self, limit: usize, block: *mut u8) -> bool {
        if self.len.get() >= limit {
            return false;
        }
        // SAFETY: the caller gives up `block`, a block of a class (aligned to at least 128
        // bytes, at least that long): its first word is ours to link it.
        unsafe { block.cast::<*mut u8>().write(self.head.get()) };
        self.head.set(block);
        self.len.set(self.len.get() + 1);
        true
    }

    /// Hands `free` the blocks that stayed unused since the last call (the shortest the list
    /// was meanwhile), and starts a new period with what is left.
    fn free_unused(&self, mut free: impl FnMut(*mut u8)) {
        for _ in 0..self.shortest.get().min(self.len.get()) {
            let Some(block) = self.pop() else { break };
            free(block);
        }
        self.shortest.set(self.len.get());
    }
}

/// Where a block of a mapped class comes from when the system refuses a mapping (too many
/// mappings for `vm.max_map_count`, an address-space limit): the C allocator, which may still
/// have room in its heaps, as glibc falls back to its heap when its own mappings fail. The
/// block is carved at `offset` into a page-aligned C block, so it is never page-aligned
/// itself (mappings always are) and keeps the class's whole size; it is freed straight back,
/// never cached.
struct Fallback {
    offset: usize,
    layout: Layout,
}

impl Fallback {
    fn new(class: MappedClass, align: usize) -> Fallback {
        // `align` is at most half a page: the offset is within the first page, never 0.
        let offset = align.max(16);
        Fallback {
            offset,
            // SAFETY: a page alignment and a size of at most 20 KiB.
            layout: unsafe { Layout::from_size_align_unchecked(offset + class.bytes(), PAGE) },
        }
    }

    /// Whether `block` of a mapped class is a fallback block, not a mapping.
    fn holds(block: *mut u8) -> bool {
        !(block as usize).is_multiple_of(PAGE)
    }

    fn take(&self, zeroed: bool) -> *mut u8 {
        // SAFETY: a valid, non-zero layout.
        let base = unsafe {
            if zeroed {
                System.alloc_zeroed(self.layout)
            } else {
                System.alloc(self.layout)
            }
        };
        if base.is_null() {
            return base;
        }
        // SAFETY: `offset` plus the class's size is within the block.
        unsafe { base.add(self.offset) }
    }

    /// # Safety
    /// `block` comes from [`Fallback::take`] of the same class and alignment.
    unsafe fn give_back(&self, block: *mut u8) {
        // SAFETY: the caller's guarantee: `block` is `offset` into a block of `layout`.
        unsafe { System.dealloc(block.sub(self.offset), self.layout) }
    }
}

/// A block from the calling thread's free `list`, if the thread caches and the list has one.
fn cached(list: impl FnOnce(&Cache) -> &FreeList) -> Option<*mut u8> {
    CACHE.with(|cache| {
        if cache.enabled.get() {
            list(cache).pop()
        } else {
            None
        }
    })
}

/// Keeps `block` in the calling thread's free `list` if the thread caches and the list holds
/// fewer than `limit`; says whether it did.
fn keep(list: impl FnOnce(&Cache) -> &FreeList, limit: usize, block: *mut u8) -> bool {
    CACHE.with(|cache| cache.enabled.get() && list(cache).push(limit, block))
}

/// A block of `class` aligned to `align`: a cached one if this thread caches and has one,
/// else a new mapping (zeroed), else a [`Fallback`] block. `zeroed` asks for a cached or
/// fallback block to be cleared.
fn take(class: MappedClass, align: usize, zeroed: bool) -> *mut u8 {
    match cached(|cache| &cache.lists[class.index()]) {
        Some(block) => {
            if zeroed {
                // SAFETY: the block is a whole mapping of `class`, now ours.
                unsafe { block.write_bytes(0, class.bytes()) };
            }
            block
        }
        None => {
            let mapped = class.map();
            if mapped.is_null() {
                Fallback::new(class, align).take(zeroed)
            } else {
                mapped
            }
        }
    }
}

/// Gives back `block` of `class`, taken with `align`: a mapping to this thread's cache if it
/// caches and has room, else to the system; a fallback block to the C allocator.
///
/// # Safety
/// `block` is a block of `class` (from [`take`] with `align`) that is not used after.
unsafe fn give_back(class: MappedClass, align: usize, block: *mut u8) {
    if Fallback::holds(block) {
        // SAFETY: the caller's guarantee; not page-aligned, so a fallback block.
        unsafe { Fallback::new(class, align).give_back(block) };
        return;
    }
    let kept = keep(
        |cache| &cache.lists[class.index()],
        class.cache_limit(),
        block,
    );
    if !kept {
        // SAFETY: the caller's guarantee.
        unsafe { class.unmap(block) };
    }
}

/// A block of aligned `class`: a cached one if this thread caches and has one (cleared if
/// `zeroed`), else one from the C allocator.
fn take_aligned(class: AlignedClass, zeroed: bool) -> *mut u8 {
    match cached(|cache| &cache.aligned[class.index()]) {
        Some(block) => {
            if zeroed {
                // SAFETY: the block is a whole block of `class`, now ours.
                unsafe { block.write_bytes(0, class.layout().size()) };
            }
            block
        }
        // SAFETY: a valid, non-zero layout.
        None if zeroed => unsafe { System.alloc_zeroed(class.layout()) },
        // SAFETY: as above.
        None => unsafe { System.alloc(class.layout()) },
    }
}

/// Gives back `block` of aligned `class`: to this thread's cache if it caches and has room,
/// else to the C allocator.
///
/// # Safety
/// `block` is a block of `class` (from [`take_aligned`]) that is not used after.
unsafe fn give_back_aligned(class: AlignedClass, block: *mut u8) {
    let kept = keep(
        |cache| &cache.aligned[class.index()],
        class.cache_limit(),
        block,
    );
    if !kept {
        // SAFETY: the caller's guarantee: made with the class's layout.
        unsafe { System.dealloc(block, class.layout()) };
    }
}

/// Which kind of block a layout gets: the kind is a pure function of the layout, so a block
/// is always freed as the kind it was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Mapped(MappedClass),
    Aligned(AlignedClass),
    Heap,
}

impl Kind {
    fn of(layout: Layout) -> Kind {
        if let Some(class) = MappedClass::of(layout) {
            Kind::Mapped(class)
        } else if let Some(class) = AlignedClass::of(layout) {
            Kind::Aligned(class)
        } else {
            Kind::Heap
        }
    }
}

// SAFETY: a block of a mapped class is a whole mapping of at least the layout's size,
// page-aligned (so aligned for any layout of that class), taken fresh or from a free list
// that only ever holds freed mappings of the same class, or, when the system refuses a
// mapping, a fallback block of the class's size at an offset aligned as the layout asks
// (never page-aligned, so never taken for a mapping); it is given back only by `dealloc` or
// `realloc` with a layout of the same class and alignment (`MappedClass::of` is a pure
// function of the layout). A block of an aligned class is made by the C allocator with the
// class's layout (at least the layout's size, aligned to 128, so to the layout's alignment),
// taken fresh or from a free list that only ever holds freed blocks of the same class, and
// freed to the C allocator with the class's layout. Every other block is the C allocator's,
// from and to `System` with the caller's layout.
unsafe impl GlobalAlloc for ThreadCachedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match Kind::of(layout) {
            Kind::Mapped(class) => take(class, layout.align(), false),
            Kind::Aligned(class) => take_aligned(class, false),
            // SAFETY: as the caller's.
            Kind::Heap => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match Kind::of(layout) {
            Kind::Mapped(class) => take(class, layout.align(), true),
            Kind::Aligned(class) => take_aligned(class, true),
            // SAFETY: as the caller's.
            Kind::Heap => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        match Kind::of(layout) {
            // SAFETY: `block` was allocated with this layout, so from this class.
            Kind::Mapped(class) => unsafe { give_back(class, layout.align(), block) },
            // SAFETY: as above.
            Kind::Aligned(class) => unsafe { give_back_aligned(class, block) },
            // SAFETY: as the caller's.
            Kind::Heap => unsafe { System.dealloc(block, layout) },
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size`, rounded up to the alignment, does not
        // overflow `isize`.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let (old_kind, new_kind) = (Kind::of(layout), Kind::of(new_layout));
        if old_kind == Kind::Heap && new_kind == Kind::Heap {
            // SAFETY: as the caller's: a C allocator block staying one.
            return unsafe { System.realloc(block, layout, new_size) };
        }
        if old_kind == new_kind {
            // The block of the class already has the room.
            return block;
        }
        // SAFETY: a valid layout, as above.
        let moved = unsafe { self.alloc(new_layout) };
        if !moved.is_null() {
            // SAFETY: both blocks are live and distinct, each at least as long as the
            // shorter size; then the old one is freed with the layout it was made with.
            unsafe {
                ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                self.dealloc(block, layout);
            }
        }
        moved
    }
}

/// The smallest size for which the C allocator maps memory of its own instead of carving it
/// from its heaps (glibc's `M_MMAP_THRESHOLD`), set so that data buffers larger than the
/// mapped classes (a `tune.bufsize` over 16 KiB) get their own mappings too, for the reason
/// the classes do. Returns whether the allocator took the setting.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn map_buffers_apart(buffer_size: usize) -> bool {
    let threshold = buffer_size.max(LARGEST_MAPPED);
    let Ok(threshold) = libc::c_int::try_from(threshold) else {
        return false;
    };
    // SAFETY: mallopt takes two integers and changes a setting of the allocator under its
    // own lock; it is called once at start-up, before the event loops start.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, threshold) == 1 }
}

/// Without glibc the allocator keeps its own policy.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn map_buffers_apart(_buffer_size: usize) -> bool {
    false
}

/// Gives the C allocator's free memory back to the system (glibc's `malloc_trim(0)`): every
/// wholly free page inside its heaps is released, not only the top of each heap, which is all
/// `free` itself returns. Returns whether memory was released; does nothing with another C
/// library.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_free_memory() -> bool {
    // SAFETY: malloc_trim takes no pointer from us; it works on the allocator's own free
    // lists under the allocator's locks, so it may run on any thread at any time.
    unsafe { libc::malloc_trim(0) != 0 }
}

/// Without glibc there is no `malloc_trim`: nothing to do.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_memory() -> bool {
    false
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    thread_local! {
        /// Makes this thread's mappings fail, as when the system refuses more.
        pub(super) static REFUSE_MAPPINGS: Cell<bool> = const { Cell::new(false) };
    }

    #[test]
    fn a_refused_mapping_falls_back_to_the_c_allocator() {
        std::thread::spawn(|| {
            cache_this_thread();
            REFUSE_MAPPINGS.set(true);
            let alloc = ThreadCachedAlloc;
            let layout = Layout::from_size_align(6000, 64).unwrap();
            // SAFETY (whole test): every block is used within its class's size and freed
            // once, with the layout it was last allocated or reallocated with.
            unsafe {
                let block = alloc.alloc_zeroed(layout);
                assert!(!block.is_null());
                // Aligned as asked, never as a mapping; zeroed, and the class's whole size
                // is usable.
                assert_eq!(block as usize % 64, 0);
                assert_ne!(block as usize % PAGE, 0);
                assert!(
                    std::slice::from_raw_parts(block, 6000)
                        .iter()
                        .all(|&b| b == 0)
                );
                block.write_bytes(0x5A, 2 * PAGE);
                // Freed to the C allocator, not cached: no trim finds it.
                alloc.dealloc(block, layout);
                trim_thread_cache();
                assert_eq!(trim_thread_cache(), 0);
                // Reallocated out of its class, its bytes follow.
                let block = alloc.alloc(layout);
                for i in 0..100 {
                    block.add(i).write(i as u8);
                }
                let large = alloc.realloc(block, layout, 40_000);
                let bytes = std::slice::from_raw_parts(large, 100);
                assert!(bytes.iter().enumerate().all(|(i, &b)| b == i as u8));
                alloc.dealloc(large, Layout::from_size_align(40_000, 64).unwrap());
                // Once the system maps again, blocks are mappings again.
                REFUSE_MAPPINGS.set(false);
                let mapped = alloc.alloc(layout);
                assert_eq!(mapped as usize % PAGE, 0);
                alloc.dealloc(mapped, layout);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn only_mid_size_blocks_are_mapped() {
        let class = |size, align| MappedClass::of(Layout::from_size_align(size, align).unwrap());
        assert_eq!(class(LARGEST_IN_HEAP, 8), None);
        assert_eq!(
            class(LARGEST_IN_HEAP + 1, 8),
            Some(MappedClass { pages: 1 })
        );
        assert_eq!(class(4096, 16), Some(MappedClass { pages: 1 }));
        assert_eq!(class(4097, 16), Some(MappedClass { pages: 2 }));
        assert_eq!(class(6224, 8), Some(MappedClass { pages: 2 }));
        assert_eq!(class(16 * 1024, 1), Some(MappedClass { pages: 4 }));
        assert_eq!(class(16 * 1024 + 1, 1), None);
        // Up to half a page of alignment (see `Fallback`).
        assert_eq!(class(8192, 2048), Some(MappedClass { pages: 2 }));
        assert_eq!(class(8192, 4096), None);
    }

    /// On a caching thread of its own (the test harness's threads do not cache): a block of
    /// `layout` freed comes back for `other`, a layout of the same class of `class_bytes`,
    /// zeroed if asked; a trim keeps it while it was taken since the last one, then frees
    /// it. A class's cache then keeps at most its limit of blocks, freeing the rest.
    fn reuses_and_trims(layout: Layout, other: Layout, class_bytes: usize, limit: usize) {
        std::thread::spawn(move || {
            cache_this_thread();
            let alloc = ThreadCachedAlloc;
            // SAFETY (whole test): every block is used within its class's size and freed
            // once, with the layout it was allocated with.
            unsafe {
                let first = alloc.alloc(layout);
                assert!(!first.is_null());
                assert!((first as usize).is_multiple_of(layout.align()));
                first.write_bytes(0xAB, layout.size());
                alloc.dealloc(first, layout);
                let again = alloc.alloc_zeroed(other);
                assert_eq!(again, first);
                let bytes = std::slice::from_raw_parts(again, class_bytes);
                assert!(bytes.iter().all(|&b| b == 0));
                alloc.dealloc(again, other);
                assert_eq!(trim_thread_cache(), 0);
                assert_eq!(trim_thread_cache(), class_bytes);
                assert_eq!(trim_thread_cache(), 0);
                let blocks: Vec<_> = (0..limit + 3).map(|_| alloc.alloc(layout)).collect();
                assert!(blocks.iter().all(|b| !b.is_null()));
                for block in blocks {
                    alloc.dealloc(block, layout);
                }
            }
            trim_thread_cache();
            assert_eq!(trim_thread_cache(), limit * class_bytes);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn blocks_freed_at_once_skip_the_cache_and_the_cache_comes_back_after() {
        std::thread::spawn(|| {
            cache_this_thread();
            let alloc = ThreadCachedAlloc;
            let layout = Layout::from_size_align(16 * 1024, 8).unwrap();
            // SAFETY: each block is freed once, with the layout it was allocated with.
            unsafe {
                let (first, second) = (alloc.alloc(layout), alloc.alloc(layout));
                freeing_at_once(|| alloc.dealloc(first, layout));
                // Nothing was kept: no trim finds anything, now or a period later.
                assert_eq!(trim_thread_cache(), 0);
                assert_eq!(trim_thread_cache(), 0);
                alloc.dealloc(second, layout);
            }
            // The cache is on again: the second block was kept, and is let go once unused.
            assert_eq!(trim_thread_cache(), 0);
            assert_eq!(trim_thread_cache(), 16 * 1024);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_caching_thread_reuses_its_mapped_blocks_and_trims_the_unused() {
        let layout = Layout::from_size_align(6000, 8).unwrap();
        let limit = MappedClass::of(layout).unwrap().cache_limit();
        reuses_and_trims(
            layout,
            Layout::from_size_align(8000, 64).unwrap(),
            2 * PAGE,
            limit,
        );
    }

    #[test]
    fn only_small_blocks_aligned_beyond_16_bytes_are_aligned_classes() {
        let class = |size, align| AlignedClass::of(Layout::from_size_align(size, align).unwrap());
        // tokio's task cell.
        assert_eq!(class(512, 128), Some(AlignedClass { units: 4 }));
        assert_eq!(class(1, 32), Some(AlignedClass { units: 1 }));
        assert_eq!(class(129, 64), Some(AlignedClass { units: 2 }));
        assert_eq!(class(LARGEST_ALIGNED, 128), Some(AlignedClass { units: 8 }));
        // The C allocator aligns to 16 by itself; larger or more aligned blocks are not these.
        assert_eq!(class(512, 16), None);
        assert_eq!(class(LARGEST_ALIGNED + 1, 128), None);
        assert_eq!(class(512, 256), None);
        assert_eq!(
            Kind::of(Layout::from_size_align(512, 128).unwrap()),
            Kind::Aligned(AlignedClass { units: 4 })
        );
        assert_eq!(
            Kind::of(Layout::from_size_align(512, 8).unwrap()),
            Kind::Heap
        );
    }

    #[test]
    fn a_caching_thread_reuses_its_aligned_blocks_and_trims_the_unused() {
        // tokio's task cell, back as a layout of the same class (4 units).
        let layout = Layout::from_size_align(512, 128).unwrap();
        let limit = AlignedClass::of(layout).unwrap().cache_limit();
        reuses_and_trims(
            layout,
            Layout::from_size_align(400, 64).unwrap(),
            512,
            limit,
        );
    }

    #[test]
    fn a_thread_that_does_not_cache_frees_aligned_blocks_at_once() {
        std::thread::spawn(|| {
            let alloc = ThreadCachedAlloc;
            let layout = Layout::from_size_align(512, 128).unwrap();
            // SAFETY: the block is used within its layout and freed once, with it.
            unsafe {
                let block = alloc.alloc(layout);
                assert_eq!(block as usize % 128, 0);
                alloc.dealloc(block, layout);
            }
            cache_this_thread();
            assert_eq!(trim_thread_cache(), 0);
            assert_eq!(trim_thread_cache(), 0, "nothing was kept");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn reallocation_moves_bytes_between_heap_and_mappings() {
        let alloc = ThreadCachedAlloc;
        let small = Layout::from_size_align(100, 8).unwrap();
        // SAFETY: each block is written within its size and freed with its last layout.
        unsafe {
            let block = alloc.alloc(small);
            for i in 0..100 {
                block.add(i).write(i as u8);
            }
            // Heap to mapping, within the mapping's class, mapping to heap: the bytes follow.
            let mapped = alloc.realloc(block, small, 5000);
            assert_eq!(mapped as usize % PAGE, 0);
            let same = alloc.realloc(mapped, Layout::from_size_align(5000, 8).unwrap(), 8000);
            assert_eq!(same, mapped);
            let large = alloc.realloc(same, Layout::from_size_align(8000, 8).unwrap(), 40_000);
            let bytes = std::slice::from_raw_parts(large, 100);
            assert!(bytes.iter().enumerate().all(|(i, &b)| b == i as u8));
            alloc.dealloc(large, Layout::from_size_align(40_000, 8).unwrap());
            // An aligned block grows within its class in place, then out of the classes.
            let aligned = Layout::from_size_align(100, 128).unwrap();
            let block = alloc.alloc(aligned);
            for i in 0..100 {
                block.add(i).write(i as u8);
            }
            assert_eq!(alloc.realloc(block, aligned, 128), block);
            let moved = alloc.realloc(block, Layout::from_size_align(128, 128).unwrap(), 2000);
            assert_eq!(moved as usize % 128, 0);
            let bytes = std::slice::from_raw_parts(moved, 100);
            assert!(bytes.iter().enumerate().all(|(i, &b)| b == i as u8));
            alloc.dealloc(moved, Layout::from_size_align(2000, 128).unwrap());
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn glibc_takes_the_buffer_mapping_threshold() {
        assert!(map_buffers_apart(16 << 10));
        // Buffers larger than the mapped classes get the same treatment; smaller ones never
        // lower the threshold under them.
        assert!(map_buffers_apart(64 << 10));
        assert!(map_buffers_apart(1024));
    }
}
