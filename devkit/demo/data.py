"""What the demo agency holds: its agents (one of each of seed 004's five agent types, a
renewal manager the orchestrator delegates to, and a data analyst over a demo dataset that
understands a request before it acts), a dozen contacts with a little history, a dataset and a
risk rule. Plain data; :mod:`devkit.demo.seed` writes it."""

from __future__ import annotations

from typing import Any, TypedDict

from devkit.fake_server.demo import DEMO_MODEL


class ContactSpec(TypedDict, total=False):
    first_name: str
    last_name: str
    email: str
    phone: str
    company: str
    job_title: str
    status: str
    tags: list[str]
    notes: list[tuple[str, str]]  # (kind, content)
    tasks: list[tuple[str, str, int]]  # (title, priority, due in days)


class AgentSpec(TypedDict):
    slug: str
    template: str  # an AgentTemplate slug (agents migration 0003)
    overrides: dict[str, Any]


DEMO_AGENCY_NAME = "Demo Agency"
DEMO_AGENCY_SLUG = "demo-agency"
MODEL_NOTE = (
    f"Runs on the {DEMO_MODEL}: a script on this machine that reads the request and the tools' "
    "results and answers like an agent would. To use a real model, set the agent's LLM provider "
    "and LLM model (e.g. OpenAI, gpt-4o)."
)
# Only the guardian is on a schedule (the brief check every quarter hour shows scheduled runs
# soon after `up` starts); the others keep their templates' events and run when asked.
GUARDIAN_SCHEDULE = "*/15 * * * *"
RENEWAL_MANAGER = "renewal-manager"  # the agent the CS orchestrator delegates renewals to


def _agent(slug: str, template: str, description: str, **overrides: Any) -> AgentSpec:
    return {
        "slug": slug,
        "template": template,
        "overrides": {
            "slug": slug,
            "description": f"{description} {MODEL_NOTE}",
            "llm_provider": "openai_compatible",
            "llm_model": DEMO_MODEL,
            "is_active": True,
            "trigger_schedule": "",
            **overrides,
        },
    }


AGENTS: list[AgentSpec] = [
    _agent(
        "sdr-agent",
        "specialist",
        "Sales development: finds the lead, scores it, notes the score and proposes an outreach "
        "e-mail, which waits for an approver.",
    ),
    _agent(
        "alex",
        "assistant",
        "Personal assistant: finds the contact, logs the request as a note and creates a "
        "follow-up task; asks a person first when the request names nobody it can find.",
        allowed_tools=[
            "crm_*",
            "email_draft",
            "calendar_*",
            "task_create",
            "data_query",
            "ask_user",
        ],
    ),
    _agent(
        "bi-agent",
        "analyst",
        "Analyst: counts contacts and tasks by status, reads the latest notes, notifies the team "
        "and writes a short report.",
    ),
    _agent(
        "cs-orchestrator",
        "orchestrator",
        "Customer-success orchestrator: finds customers no open task covers and delegates a "
        "renewal check-in to the renewal manager agent, waiting for its answer.",
        # A delegated run may use only the tools its parent was offered (teams.services): the
        # CRM tools the renewal manager works with are the orchestrator's too.
        allowed_tools=[
            "data_query",
            "task_create",
            "notify_user",
            "trigger_workflow",
            "delegate_to_agent",
            "crm_search_contacts",
            "crm_get_contact",
            "crm_add_note",
        ],
        delegate_agents=[RENEWAL_MANAGER],
    ),
    _agent(
        RENEWAL_MANAGER,
        "assistant",
        "Renewal manager: takes the renewal check-ins the CS orchestrator delegates, logs each "
        "on the customer's record and creates a follow-up task.",
        name="Renewal Manager",
        system_prompt="Handle the customer renewals the CS orchestrator hands you: open the "
        "customer's record, log the renewal check-in on it and create a follow-up task for the "
        "account owner. Answer with what you did.",
        allowed_tools=["crm_*", "task_create"],
    ),
    _agent(
        "data-analyst",
        "analyst",
        "Data analyst: answers questions about the agency's datasets with SQL and a chart. It "
        "states how it understands a request before acting, and asks which measure or period is "
        'meant when the request leaves it open ("Who are our best customers?").',
        name="Data Analyst",
        system_prompt="Answer questions about the agency's datasets: list them, read the schema "
        "of the one the question is about, and query it with execute_sql (one SELECT); draw "
        "the answer's figures as a chart with execute_python (matplotlib). Answer with the "
        "figures, and say which column you ranked or summed by.",
        allowed_tools=[
            "list_datasets",
            "get_dataset_schema",
            "execute_sql",
            "execute_query_plan",
            "execute_python",
        ],
        understanding_enabled=True,
    ),
    _agent(
        "security-guardian",
        "guardian",
        "Guardian: every quarter hour, checks failed e-mails and bursts of new contacts; alerts "
        "only when something looks wrong.",
        trigger_schedule=GUARDIAN_SCHEDULE,
    ),
]


class MemorySpec(TypedDict):
    agent: str  # slug
    contact: str  # the e-mail of the contact it is about
    memory_type: str
    content: str
    importance: int


# What the demo agents remember before any run (their runs add more: the demo model answers the
# after-run review with what they did), so that the first run about Priya recalls something.
MEMORIES: list[MemorySpec] = [
    {
        "agent": "sdr-agent",
        "contact": "priya.raman@northwind-traders.example",
        "memory_type": "preference",
        "content": "Priya Raman (Northwind Traders) prefers e-mail to calls and wants the "
        "12-seat pricing before the end of the quarter.",
        "importance": 7,
    },
    {
        "agent": "alex",
        "contact": "emma@castellanos-bakery.example",
        "memory_type": "preference",
        "content": "Emma Castellanos (Castellanos Bakery Co.) likes a short agenda sent the day "
        "before any meeting.",
        "importance": 6,
    },
]

RISK_RULE: dict[str, Any] = {
    "name": "Outreach e-mails (demo)",
    "description": "Every e-mail an agent writes to a contact is read by a person first. "
    "(email_send is a dangerous tool anyway; this rule rates its approvals high and names "
    "itself on them.)",
    "tool_pattern": "email_send",
    "condition": {},
    "risk_level": "high",
    "requires_approval": True,
    "priority": 50,
}

CONTACTS: list[ContactSpec] = [
    {
        "first_name": "Priya",
        "last_name": "Raman",
        "email": "priya.raman@northwind-traders.example",
        "phone": "+44 20 7946 0321",
        "company": "Northwind Traders",
        "job_title": "Head of Growth",
        "status": "lead",
        "tags": ["inbound", "pricing"],
        "notes": [("call", "Asked about pricing for 12 seats; decision expected this quarter.")],
    },
    {
        "first_name": "Marcus",
        "last_name": "Oyelaran",
        "email": "marcus@brightline-logistics.example",
        "phone": "+1 312 555 0148",
        "company": "Brightline Logistics",
        "job_title": "Operations Director",
        "status": "lead",
        "tags": ["demo-request"],
    },
    {
        "first_name": "Sofia",
        "last_name": "Lindqvist",
        "email": "sofia@fjordandfield.example",
        "company": "Fjord & Field Studio",
        "job_title": "Founder",
        "status": "lead",
        "tags": ["referral"],
        "notes": [("note", "Referred by Emma Castellanos; interested in a website refresh.")],
    },
    {
        "first_name": "Amara",
        "last_name": "Nwosu",
        "email": "amara.nwosu@sunleaf-skincare.example",
        "phone": "+234 1 555 0192",
        "company": "Sunleaf Skincare",
        "job_title": "VP Marketing",
        "status": "lead",
        "tags": ["inbound", "enterprise"],
    },
    {
        "first_name": "Hiroshi",
        "last_name": "Tanaka",
        "email": "h.tanaka@kumo-analytics.example",
        "company": "Kumo Analytics",
        "job_title": "IT Lead",
        "status": "lead",
        "tags": ["webinar"],
    },
    {
        "first_name": "Daniel",
        "last_name": "Okafor",
        "email": "daniel.okafor@harbordental.example",
        "phone": "+1 617 555 0173",
        "company": "Harbor Dental Group",
        "job_title": "Marketing Manager",
        "status": "active",
        "tags": ["newsletter"],
    },
    {
        "first_name": "Chloé",
        "last_name": "Martin",
        "email": "chloe.martin@maisonverte.example",
        "company": "Maison Verte",
        "job_title": "Head of E-commerce",
        "status": "active",
        "tags": ["pricing"],
    },
    {
        "first_name": "Emma",
        "last_name": "Castellanos",
        "email": "emma@castellanos-bakery.example",
        "phone": "+1 415 555 0119",
        "company": "Castellanos Bakery Co.",
        "job_title": "CEO",
        "status": "customer",
        "tags": ["retainer"],
        "notes": [
            ("meeting", "Quarterly review: happy with the retainer; wants a spring campaign.")
        ],
        "tasks": [("Send Emma the spring campaign proposal", "medium", 5)],
    },
    {
        "first_name": "Grace",
        "last_name": "Whitfield",
        "email": "grace@whitfield-physio.example",
        "company": "Whitfield Physio",
        "job_title": "Practice Manager",
        "status": "customer",
        "tags": ["retainer", "renewal-q1"],
        "notes": [("email", "Renewal due at the end of Q1; asked for a usage summary first.")],
        "tasks": [("Prepare the Whitfield Physio renewal pack", "high", 10)],
    },
    {
        "first_name": "Liam",
        "last_name": "O'Connor",
        "email": "liam@oconnor-plumbing.example",
        "phone": "+353 1 555 0137",
        "company": "O'Connor Plumbing & Heating",
        "job_title": "Owner",
        "status": "customer",
        "tags": ["local-seo"],
    },
    {
        "first_name": "Rachel",
        "last_name": "Goldberg",
        "email": "rachel.goldberg@meridian-legal.example",
        "company": "Meridian Legal LLP",
        "job_title": "COO",
        "status": "customer",
        "tags": ["enterprise", "renewal-q1"],
    },
    {
        "first_name": "Jonas",
        "last_name": "Becker",
        "email": "jonas.becker@alpenwerk.example",
        "phone": "+49 89 555 0164",
        "company": "Alpenwerk GmbH",
        "job_title": "Procurement",
        "status": "inactive",
        "tags": ["lost-2025"],
        "notes": [("call", "Chose an in-house team; revisit next year.")],
    },
]


class DatasetSpec(TypedDict):
    name: str
    title: str
    description: str
    csv: str


# The data analyst's dataset (datasets/): one row per customer, three measures a request for
# "the best customers" may mean.
DATASETS: list[DatasetSpec] = [
    {
        "name": "customer_sales",
        "title": "Customer sales",
        "description": "One row per customer: lead score (0-100), deals won and deal value "
        "(USD) this year, and region.",
        "csv": "customer,region,lead_score,deals_won,deal_value\n"
        "Northwind Traders,EMEA,88,4,52000\n"
        "Contoso,NA,72,9,41000\n"
        "Fabrikam,NA,95,2,87000\n"
        "Tailspin Toys,APAC,64,6,23000\n"
        "Wide World Importers,EMEA,79,7,66000\n"
        "Adventure Works,NA,58,3,19000\n"
        "Litware,APAC,91,5,34000\n"
        "Proseware,EMEA,45,1,8000\n",
    }
]
