//! "The allocator of process P on GPU G": one answer, asked by every reader (the screens,
//! the alert inputs, the growth sort, the exporter, the report). A companion names its
//! devices (UUID, PCI bus id) and the NVML side names cards; where the companion could not
//! name a device, its `CUDA_VISIBLE_DEVICES` maps it (`Companions`' matching, which nothing
//! outside `model` can call).

use crate::model::allocator::{DevAlloc, ProcAlloc};
use crate::model::state::State;
use crate::model::time::Ts;

/// A process's allocator state on one card.
#[derive(Debug, Clone, Copy)]
pub struct AllocOn<'a> {
    pub proc: &'a ProcAlloc,
    pub dev: &'a DevAlloc,
    /// The companion is gone: this is the last state it reported (the post-mortem the
    /// screens keep while the process's row stays).
    pub ended: bool,
}

impl AllocOn<'_> {
    /// How long ago, in data time, the companion last reported this device.
    pub fn age(&self, now: Ts) -> Ts {
        now - self.dev.last_t
    }
}

impl State {
    /// The allocator of `pid` on the GPU with NVML index `gpu`: its live companion's, else
    /// (no live companion) the last state of one that ended.
    pub fn alloc_on(&self, pid: u32, gpu: u32) -> Option<AllocOn<'_>> {
        let all = self.gpu_infos();
        let info = all.iter().find(|i| i.index == gpu)?;
        let c = &self.companions;
        match c.get(pid) {
            Some(proc) => Some(AllocOn {
                proc,
                dev: c.for_gpu_in(pid, info, all)?,
                ended: false,
            }),
            None => Some(AllocOn {
                proc: c.latest(pid)?,
                dev: c.latest_for_gpu_in(pid, info, all)?,
                ended: true,
            }),
        }
    }

    /// `alloc_on` of a live companion only: what alerts, rates and exports read.
    pub fn live_alloc_on(&self, pid: u32, gpu: u32) -> Option<&DevAlloc> {
        self.alloc_on(pid, gpu).filter(|a| !a.ended).map(|a| a.dev)
    }

    /// Every card a live companion of `pid` has allocator state on, as (NVML index,
    /// device), in NVML order.
    pub fn live_allocs_of(&self, pid: u32) -> impl Iterator<Item = (u32, &DevAlloc)> {
        self.gpu_infos()
            .iter()
            .filter_map(move |g| Some((g.index, self.live_alloc_on(pid, g.index)?)))
    }
}

#[cfg(test)]
mod tests {
    use crate::model::frame::{CompanionFrame, Frame, Header};
    use crate::model::sample::GpuInfo;
    use crate::model::state::State;
    use crate::wire::{DeviceInfo, Disconnected, Hello, Message, Sample};

    fn card(index: u32, uuid: &str) -> GpuInfo {
        GpuInfo {
            index,
            name: "H200".into(),
            uuid: uuid.into(),
            pci_bus_id: String::new(),
            memory_total: 100,
            mig_uuids: vec![],
        }
    }

    /// The companion's device 0 is the second card (it named it by UUID): the answer is
    /// the same for every reader, live, and after the companion went, the post-mortem.
    #[test]
    fn a_named_device_is_on_its_card_live_and_after_its_companion_ended() {
        let mut s = State::default();
        s.apply(&Frame::Header(Header::bare(vec![
            card(0, "GPU-A"),
            card(1, "GPU-B"),
        ])));
        let msg = |t, msg| Frame::Companion(CompanionFrame { t, pid: 7, msg });
        s.apply(&msg(
            1_000,
            Message::Hello(Hello {
                devices: vec![DeviceInfo {
                    dev: 0,
                    uuid: Some("gpu-b".into()),
                    ..DeviceInfo::default()
                }],
                ..Hello::default()
            }),
        ));
        s.apply(&msg(
            2_000,
            Message::Sample(Sample {
                dev: 0,
                reserved: Some(50),
                ..Sample::default()
            }),
        ));
        assert!(s.alloc_on(7, 0).is_none(), "not on the first card");
        let a = s.alloc_on(7, 1).expect("on the second card");
        assert_eq!((a.dev.dev, a.ended, a.age(2_500)), (0, false, 500));
        assert_eq!(s.live_allocs_of(7).map(|(g, _)| g).collect::<Vec<_>>(), [1]);
        s.apply(&msg(3_000, Message::Disconnected(Disconnected::default())));
        let a = s.alloc_on(7, 1).expect("the post-mortem stays");
        assert!(a.ended);
        assert!(
            s.live_alloc_on(7, 1).is_none(),
            "nothing live to alert on or export"
        );
    }
}
