//! What a binary drives through the run loop: the pipeline, or one of the operator's
//! commands, behind one `Driver`.

/// What a binary drives: the pipeline, or one of the operator's commands (`check`,
/// `status`, `drop-slot`, `ddl`), all through the same run loop.
#[derive(Debug)]
pub enum Machine {
    Pipeline(Box<slotline_core::pipeline::Pipeline>),
    Check(Box<slotline_core::ops::Check>),
    Status(Box<slotline_core::ops::Status>),
    DropSlot(Box<slotline_core::ops::DropSlot>),
    Ddl(Box<slotline_core::ops::Ddl>),
}

impl Machine {
    fn driver(&self) -> &dyn slotline_core::io::Driver {
        match self {
            Machine::Pipeline(m) => &**m,
            Machine::Check(m) => &**m,
            Machine::Status(m) => &**m,
            Machine::DropSlot(m) => &**m,
            Machine::Ddl(m) => &**m,
        }
    }

    fn driver_mut(&mut self) -> &mut dyn slotline_core::io::Driver {
        match self {
            Machine::Pipeline(m) => &mut **m,
            Machine::Check(m) => &mut **m,
            Machine::Status(m) => &mut **m,
            Machine::DropSlot(m) => &mut **m,
            Machine::Ddl(m) => &mut **m,
        }
    }
}

impl slotline_core::io::Driver for Machine {
    fn handle(&mut self, now: slotline_core::time::Now, input: slotline_core::io::Input) {
        self.driver_mut().handle(now, input);
    }

    fn poll_command(&mut self) -> Option<slotline_core::io::Command> {
        self.driver_mut().poll_command()
    }

    fn poll_timeout(&self) -> Option<slotline_core::timer::Deadline> {
        self.driver().poll_timeout()
    }

    fn health(&self) -> Option<slotline_core::health::Health> {
        self.driver().health()
    }
}
