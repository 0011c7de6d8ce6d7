"""Payment batch: pay supplier invoices through a flaky payments gateway, exactly once each.

The gateway fails in the ways real ones do. A ``503`` means nothing happened and the call can be retried. A
``504`` means the confirmation was lost: the payment may or may not have gone through, so blindly retrying
risks paying twice; the agent has to check the ledger first (and can void a duplicate). At the hardest level
one supplier has closed the account printed on its invoice, which is refused until the agent looks up the
supplier's current remittance details. Faults are scheduled per invoice at reset, so an episode replays
exactly. The final ledger is checked (one live payment per invoice, right amount, right account, nothing
else) and so is the reported balance.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from spade.env import ToolEnv, answer_action, function_schema, tool_call_action

_SUPPLIERS = (
    "Kestrel Packaging", "Alder & Finch Printing", "Bluewater Logistics", "Orchard Office Supply",
    "Granite Facility Services", "Lumen Electrical", "Harbour Coffee Roasters", "Pinecrest Uniforms",
    "Tidewell Cleaning", "Copperleaf IT",
)  # fmt: skip
_FAULT_MESSAGES = {
    "503": "Error 503 Service Unavailable: the payment was not processed. Retry later.",
    "504": "Error 504 Gateway Timeout: no confirmation received; the payment may or may not have been made.",
}


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string")
    return value.strip().upper()


def _money(value: object, name: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number")
    if isinstance(value, str):
        try:
            value = float(value.replace(",", "").strip())
        except ValueError:
            raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{name} must be a positive number")
    return round(float(value), 2)


def _iban(rng: random.Random) -> str:
    return f"GB{rng.randint(10, 99)}NWBK{rng.randrange(10**13, 10**14)}"


class PaymentBatchEnv(ToolEnv):
    """Pay a batch of invoices exactly once through a gateway that returns transient and ambiguous errors.

    Level 0: two invoices, one retryable ``503``. Level 1: three invoices with a ``503`` and an ambiguous
    ``504`` timeout. Level 2: four invoices, repeated ``503``s, a ``504`` and a closed beneficiary account.
    """

    skill = "error_recovery"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 24
    tools: ClassVar[list[dict[str, Any]]] = [
        function_schema("get_invoice", "Read an invoice: supplier, amount, pay-to account, status.",
                        invoice_id=("string", "Invoice id, e.g. INV-20417")),
        function_schema("get_supplier", "Read a supplier's record, including its current remittance account.",
                        supplier_id=("string", "Supplier id, e.g. S-07")),
        function_schema("send_payment", "Pay from the operations account. Use the invoice id as reference.",
                        to_account=("string", "Beneficiary account (IBAN)"),
                        amount=("number", "Amount in GBP, two decimals"),
                        reference=("string", "Payment reference (the invoice id)")),
        function_schema("list_payments", "List every payment the gateway executed today, with its status."),
        function_schema("void_payment", "Void an executed payment (the money returns to the account).",
                        payment_id=("string", "Payment id, e.g. PAY-5012")),
        function_schema("get_balance", "Current balance of the operations account."),
    ]  # fmt: skip

    # -- world ------------------------------------------------------------------------------------------
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        rng = self.rng
        self.balance = round(rng.uniform(30000, 80000), 2)
        self.suppliers: dict[str, dict[str, Any]] = {
            f"S-{i + 1:02d}": {"name": name, "account": _iban(rng)} for i, name in enumerate(_SUPPLIERS)
        }
        self.invoices: dict[str, dict[str, Any]] = {}
        for sid in rng.sample(list(self.suppliers), 9):
            self.invoices[f"INV-{rng.randrange(10000, 99999)}"] = {
                "supplier": sid, "amount": round(rng.uniform(120, 6000), 2),
                "account": self.suppliers[sid]["account"],
            }  # fmt: skip
        self.payments: dict[str, dict[str, Any]] = {}
        self._next_payment = rng.randrange(3000, 9000)
        self._plan_faults()
        return self._intro(), {"difficulty": self.difficulty}

    def _plan_faults(self) -> None:
        """Choose the batch and each invoice's scripted gateway outcomes (consumed one per attempt)."""
        rng = self.rng
        ambiguous = [rng.choice(("504-done", "504-lost"))]
        plans: list[list[str]] = (
            [["503"], []],
            [rng.choice((["503"], ["503", "503"])), ambiguous, []],
            [["503", "503"], ambiguous, rng.choice(([], ["503"])), []],
        )[self.difficulty]
        rng.shuffle(plans)
        self.batch = rng.sample(list(self.invoices), len(plans))
        self.faults = {inv: list(plan) for inv, plan in zip(self.batch, plans, strict=True)}
        self.closed: set[str] = set()
        if self.difficulty == 2:
            moved = next(inv for inv in self.batch if "504-done" not in self.faults[inv])
            sid = self.invoices[moved]["supplier"]
            self.closed.add(self.suppliers[sid]["account"])
            self.suppliers[sid]["account"] = _iban(rng)

    def _intro(self) -> str:
        listing = ", ".join(self.batch)
        lines = [
            f"Accounts payable: pay invoices {listing} from the operations account. The payments gateway is "
            "unreliable today, so make sure every invoice ends up paid exactly once, in full, to the "
            "supplier's valid account, and that nothing else is paid. Then report the operations account's "
            "balance.",
            "",
            "Tools:",
        ]
        for schema in self.tools:
            fn = schema["function"]
            lines.append(f"- {fn['name']}({', '.join(fn['parameters']['properties'])}): {fn['description']}")
        lines += [
            "",
            'Call tools with <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>'
            " (one or more per turn).",
            "Finish with <answer>BALANCE</answer> (e.g. 41250.75); your first answer ends the episode.",
        ]
        return "\n".join(lines)

    # -- tools ------------------------------------------------------------------------------------------
    def tool_get_invoice(self, invoice_id: object) -> str:
        inv = _text(invoice_id, "invoice_id")
        if inv not in self.invoices:
            return f"Error 404: no invoice {inv}."
        i = self.invoices[inv]
        paid = [
            pid for pid, p in self.payments.items() if p["reference"] == inv and p["status"] == "executed"
        ]
        status = f"paid ({', '.join(paid)})" if paid else "open"
        return (
            f"{inv}: supplier {i['supplier']}, amount {i['amount']:.2f} GBP, pay to {i['account']}, {status}"
        )

    def tool_get_supplier(self, supplier_id: object) -> str:
        sid = _text(supplier_id, "supplier_id")
        if sid not in self.suppliers:
            return f"Error 404: no supplier {sid}."
        s = self.suppliers[sid]
        return f"{sid}: {s['name']}, current remittance account {s['account']}"

    def tool_send_payment(self, to_account: object, amount: object, reference: object) -> str:
        account, ref = _text(to_account, "to_account"), _text(reference, "reference")
        value = _money(amount, "amount")
        if account in self.closed:
            return f"Error 422: beneficiary account {account} is closed."
        if value > self.balance:
            return "Error 402: insufficient funds."
        plan = self.faults.get(ref, [])
        outcome = plan.pop(0) if plan else "ok"
        if outcome == "503":
            return _FAULT_MESSAGES["503"]
        if outcome == "504-lost":
            return _FAULT_MESSAGES["504"]
        pid = f"PAY-{self._next_payment}"
        self._next_payment += 1
        self.balance = round(self.balance - value, 2)
        self.payments[pid] = {"account": account, "amount": value, "reference": ref, "status": "executed"}
        if outcome == "504-done":
            return _FAULT_MESSAGES["504"]
        return f"Payment {pid} executed: {value:.2f} GBP to {account}, reference {ref}."

    def tool_list_payments(self) -> str:
        if not self.payments:
            return "No payments today."
        return "\n".join(
            f"{pid}: {p['amount']:.2f} GBP to {p['account']}, reference {p['reference']}, {p['status']}"
            for pid, p in self.payments.items()
        )

    def tool_void_payment(self, payment_id: object) -> str:
        pid = _text(payment_id, "payment_id")
        payment = self.payments.get(pid)
        if payment is None or payment["status"] != "executed":
            return f"Error 404: no executed payment {pid}."
        payment["status"] = "voided"
        self.balance = round(self.balance + payment["amount"], 2)
        return f"Voided {pid}; {payment['amount']:.2f} GBP returned."

    def tool_get_balance(self) -> str:
        return f"Operations account balance: {self.balance:.2f} GBP"

    # -- verdict ----------------------------------------------------------------------------------------
    def check_answer(self, answer: str) -> bool:
        live = [p for p in self.payments.values() if p["status"] == "executed"]
        if len(live) != len(self.batch):
            return False
        for inv in self.batch:
            want = self.invoices[inv]
            account = self.suppliers[want["supplier"]]["account"]
            if not any(
                p["reference"] == inv
                and p["account"] == account
                and abs(p["amount"] - want["amount"]) < 0.005
                for p in live
            ):
                return False
        try:
            reported = float(answer.replace(",", "").replace("GBP", "").strip())
        except ValueError:
            return False
        return abs(reported - self.balance) < 0.005

    def solution(self) -> list[str]:
        actions = []
        balance = self.balance
        for inv in self.batch:
            i = self.invoices[inv]
            actions.append(tool_call_action("get_invoice", invoice_id=inv))
            pay = tool_call_action("send_payment", to_account=i["account"], amount=i["amount"], reference=inv)
            if i["account"] in self.closed:  # refused: look up the current account, pay there
                actions.append(pay)
                actions.append(tool_call_action("get_supplier", supplier_id=i["supplier"]))
                current = self.suppliers[i["supplier"]]["account"]
                pay = tool_call_action("send_payment", to_account=current, amount=i["amount"], reference=inv)
            actions.append(pay)
            for outcome in self.faults[inv]:
                if outcome.startswith("504"):  # ambiguous: check the ledger before deciding to retry
                    actions.append(tool_call_action("list_payments"))
                if outcome != "504-done":
                    actions.append(pay)
            balance -= i["amount"]
        actions.append(tool_call_action("get_balance"))
        return [*actions, answer_action(f"{balance:.2f}")]

    def sample_action(self, rng: random.Random) -> str:
        """A random plausible action: any tool with arguments drawn from the books, or a balance guess."""
        roll = rng.random()
        if roll < 0.15:
            return answer_action(f"{self.balance - rng.uniform(0, 15000):.2f}")
        inv = self.invoices[rng.choice([*self.batch, *self.invoices])]
        if roll < 0.5:
            account = rng.choice(
                [inv["account"], self.suppliers[rng.choice(list(self.suppliers))]["account"]]
            )
            reference = rng.choice([*self.batch, *self.invoices])
            return tool_call_action(
                "send_payment", to_account=account, amount=inv["amount"], reference=reference
            )
        if roll < 0.6 and self.payments:
            return tool_call_action("void_payment", payment_id=rng.choice(list(self.payments)))
        name, args = rng.choice((
            ("get_invoice", {"invoice_id": rng.choice(list(self.invoices))}),
            ("get_supplier", {"supplier_id": inv["supplier"]}),
            ("list_payments", {}), ("get_balance", {}),
        ))  # fmt: skip
        return tool_call_action(name, **args)


ENV = PaymentBatchEnv
